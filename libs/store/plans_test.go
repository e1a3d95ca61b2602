package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestProjectionLooksUpWorkloadsByKeyAsTheTableGrows: the projector's
// batches find the workloads they touch by key, however small the table
// was when their statements were first prepared. PostgreSQL caches a
// prepared statement's generic plan after five runs; planned on a nearly
// empty table, a lookup of a batch's keys became a hash join over a scan
// of the whole table, which then ran for every batch as the table grew
// (2.9 ms a batch at 15,000 workloads, growing without bound). Counted
// here as the sequential scans PostgreSQL reports on the table.
func TestProjectionLooksUpWorkloadsByKeyAsTheTableGrows(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	l := &log{}
	apply := func() {
		t.Helper()
		if _, err := s.Apply(ctx, l.recs); err != nil {
			t.Fatal(err)
		}
	}
	// Batches while the table is small: each statement's plan is cached
	// on every connection that ran it.
	for i := range 40 {
		l.submit("ns", fmt.Sprintf("early-%02d", i))
		l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", fmt.Sprintf("early-%02d", i)), Admission: admission(1)})
		apply()
		l.add(events.WorkloadDeleted, &events.WorkloadRef{Namespace: "ns", Name: fmt.Sprintf("early-%02d", i)})
		apply()
	}
	// The table grows in one batch.
	for i := range 20_000 {
		l.submit(fmt.Sprintf("ns%d", i%7), fmt.Sprintf("bulk-%05d", i))
	}
	apply()
	// Everything so far counted (40 + 20,000 rows in, 40 out), the bulk
	// batch's own scan included.
	scans := tableStats(t, s, 40+20_000, 40)
	// Small batches again: a new workload, one already there admitted,
	// one deleted, in each.
	const batches = 20
	for i := range batches {
		l.submit("ns", fmt.Sprintf("late-%02d", i))
		l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref(fmt.Sprintf("ns%d", i%7), fmt.Sprintf("bulk-%05d", i)), Admission: admission(1)})
		l.add(events.WorkloadDeleted, &events.WorkloadRef{Namespace: fmt.Sprintf("ns%d", (i+1000)%7), Name: fmt.Sprintf("bulk-%05d", i+1000)})
		apply()
	}
	after := tableStats(t, s, 40+20_000+batches, 40+batches)
	if got := after - scans; got != 0 {
		t.Errorf("%d sequential scans of workloads over %d small batches on %d rows, want 0", got, batches, 20_000)
	}
}

// tableStats reads the sequential scans PostgreSQL has counted on the
// workloads table, once it counts at least the given inserted and deleted
// rows: a backend reports its counts when idle, up to a second after its
// transaction, and a batch's scans are reported with its rows.
func tableStats(t *testing.T, s *Store, inserted, deleted int64) int64 {
	t.Helper()
	var scans int64
	testenv.Eventually(t, "PostgreSQL reports the batches' counts", 30*time.Second, func() error {
		var ins, del int64
		err := s.Pool.QueryRow(context.Background(),
			`SELECT seq_scan, n_tup_ins, n_tup_del FROM pg_stat_user_tables WHERE relid = 'workloads'::regclass`).Scan(&scans, &ins, &del)
		if err != nil {
			return err
		}
		if ins < inserted || del < deleted {
			return fmt.Errorf("%d inserted and %d deleted rows counted, want %d and %d", ins, del, inserted, deleted)
		}
		return nil
	})
	return scans
}
