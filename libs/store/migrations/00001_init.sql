-- +goose Up
-- The projection is a read model of JQ_EVENTS: it can be dropped and
-- rebuilt by replaying the stream. last_seq makes every replay and
-- redelivery a no-op.
CREATE TABLE projection_state (
    id       int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    last_seq bigint NOT NULL
);
INSERT INTO projection_state (id, last_seq) VALUES (1, 0);

CREATE TABLE workloads (
    namespace     text        NOT NULL,
    name          text        NOT NULL,
    uid           text        NOT NULL DEFAULT '',
    local_queue   text        NOT NULL DEFAULT '',
    cluster_queue text        NOT NULL DEFAULT '',
    priority      int         NOT NULL DEFAULT 0,
    status        text        NOT NULL,
    admission     jsonb,
    reason        text        NOT NULL DEFAULT '',
    message       text        NOT NULL DEFAULT '',
    pods_ready    boolean     NOT NULL DEFAULT false,
    requeue_at    timestamptz,
    created_at    timestamptz NOT NULL,
    admitted_at   timestamptz,
    evictions     int         NOT NULL DEFAULT 0,
    last_seq      bigint      NOT NULL,
    PRIMARY KEY (namespace, name)
);
-- Pending work is what queries look for most; the index holds only it.
CREATE INDEX workloads_pending ON workloads (cluster_queue, priority DESC, created_at, namespace, name)
    WHERE status = 'pending';
CREATE INDEX workloads_page ON workloads (namespace, name);

CREATE TABLE workload_events (
    seq       bigint      PRIMARY KEY,
    namespace text        NOT NULL,
    name      text        NOT NULL,
    type      text        NOT NULL,
    time      timestamptz NOT NULL,
    data      jsonb       NOT NULL
);
CREATE INDEX workload_events_by_workload ON workload_events (namespace, name, seq);

CREATE TABLE queue_usage (
    cluster_queue text   NOT NULL,
    flavor        text   NOT NULL,
    resource      text   NOT NULL,
    used          bigint NOT NULL,
    PRIMARY KEY (cluster_queue, flavor, resource)
);

CREATE TABLE config_objects (
    kind      text   NOT NULL,
    namespace text   NOT NULL DEFAULT '',
    name      text   NOT NULL,
    object    jsonb  NOT NULL,
    last_seq  bigint NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);

-- +goose Down
DROP TABLE config_objects;
DROP TABLE queue_usage;
DROP TABLE workload_events;
DROP TABLE workloads;
DROP TABLE projection_state;
