package store

import (
	"context"
	"slices"
	"testing"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestNoStatisticsOfDocuments: ANALYZE, which autovacuum runs as the
// projection grows, gathers statistics of the columns queries filter on
// and none of the JSON documents that are only read back (gathering them
// detoasts and compares every sampled document: a burst of CPU next to
// the services).
func TestNoStatisticsOfDocuments(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		`INSERT INTO workloads (namespace, name, status, admission, object, kueue_status, created_at, last_seq)
		 SELECT 'ns', 'w' || i, 'pending', '{"a": 1}', '{"kind": "Workload"}', '{"conditions": []}', now(), i FROM generate_series(1, 200) i`,
		`INSERT INTO workload_events (seq, namespace, name, type, time, data)
		 SELECT i, 'ns', 'w' || i, 'submitted', now(), '{"d": 1}' FROM generate_series(1, 200) i`,
		`ANALYZE workloads`, `ANALYZE workload_events`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for table, want := range map[string][]string{
		"workloads":       {"cluster_queue", "created_at", "last_seq", "name", "namespace", "status"},
		"workload_events": {"name", "namespace", "seq", "time", "type"},
	} {
		rows, err := s.Pool.Query(ctx, `SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1 ORDER BY attname`, table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, doc := range []string{"admission", "object", "kueue_status", "data"} {
			if slices.Contains(got, doc) {
				t.Errorf("%s: ANALYZE gathered statistics of the document column %s (columns with statistics: %v)", table, doc, got)
			}
		}
		for _, c := range want {
			if !slices.Contains(got, c) {
				t.Errorf("%s: no statistics of %s, which queries filter on (columns with statistics: %v)", table, c, got)
			}
		}
	}
}
