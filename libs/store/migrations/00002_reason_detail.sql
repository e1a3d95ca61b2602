-- +goose Up
-- The whole reason value (token, podSet, flavor, resource, cohort,
-- shortfall, message), for explain.
ALTER TABLE workloads ADD COLUMN reason_detail jsonb;

-- +goose Down
ALTER TABLE workloads DROP COLUMN reason_detail;
