-- +goose Up
-- Where a pending workload stands in its ClusterQueue's queue, as the
-- admission engine orders it: its creation time, or (NULL here) the time of
-- its eviction by a PodsReady timeout when waitForPodsReady's
-- requeuingStrategy.timestamp is Eviction.
ALTER TABLE workloads ADD COLUMN queue_time timestamptz;

-- +goose Down
ALTER TABLE workloads DROP COLUMN queue_time;
