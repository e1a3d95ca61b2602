-- +goose Up
-- workloads_page indexed (namespace, name), which the primary key already
-- does with the same order and collation: keyset pages read the primary
-- key's index alike, and every write of a row no longer maintains a
-- second copy of it.
DROP INDEX workloads_page;

-- +goose Down
CREATE INDEX workloads_page ON workloads (namespace, name);
