-- +goose Up
-- The projection's JSON documents are read back, never filtered on: the
-- planner needs no statistics of them, and ANALYZE detoasting and
-- comparing tens of thousands of them each time autovacuum runs takes a
-- core for hundreds of milliseconds (with PostgreSQL next to the
-- services on 2 cores, submit→QuotaReserved p99 went from about 15 ms to
-- 28–50 ms, max 335–465 ms, in the minute that happened).
ALTER TABLE workloads ALTER COLUMN object SET STATISTICS 0,
                      ALTER COLUMN kueue_status SET STATISTICS 0,
                      ALTER COLUMN admission SET STATISTICS 0;
ALTER TABLE workload_events ALTER COLUMN data SET STATISTICS 0;

-- +goose Down
ALTER TABLE workload_events ALTER COLUMN data SET STATISTICS -1;
ALTER TABLE workloads ALTER COLUMN admission SET STATISTICS -1,
                      ALTER COLUMN kueue_status SET STATISTICS -1,
                      ALTER COLUMN object SET STATISTICS -1;
