-- +goose Up
-- Events the projection could not store (their content is refused by the
-- database, or they do not decode) are parked here instead of being lost
-- or retried forever: the projection moves past them, and this table says
-- which, why, and holds the raw bytes for whoever investigates.
CREATE TABLE parked_events (
    seq       bigint      PRIMARY KEY,
    type      text        NOT NULL,
    subject   text        NOT NULL,
    reason    text        NOT NULL,
    data      bytea       NOT NULL,
    parked_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE parked_events;
