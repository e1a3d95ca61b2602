-- +goose Up
-- Kueue's objects as Kueue shows them: each workload's submitted
-- object and its status as Kueue writes it (conditions, requeueState;
-- libs/status), and when each configuration object was first and last
-- applied. Rows projected before this migration have none until
-- `jqctl projection rebuild`.
ALTER TABLE workloads ADD COLUMN object jsonb;
ALTER TABLE workloads ADD COLUMN kueue_status jsonb;
ALTER TABLE config_objects ADD COLUMN created_at timestamptz;
ALTER TABLE config_objects ADD COLUMN updated_at timestamptz;

-- +goose Down
ALTER TABLE config_objects DROP COLUMN updated_at;
ALTER TABLE config_objects DROP COLUMN created_at;
ALTER TABLE workloads DROP COLUMN kueue_status;
ALTER TABLE workloads DROP COLUMN object;
