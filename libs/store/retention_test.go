package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/events"
)

// kept is what the projection holds of one workload: its row's status
// ("" without a row) and how many of its events.
type kept struct {
	Status string
	Events int
}

func keptState(t *testing.T, s *Store) map[string]kept {
	t.Helper()
	ctx := context.Background()
	got := map[string]kept{}
	rows, err := s.Pool.Query(ctx, `SELECT name, status FROM workloads`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, status string
		if err := rows.Scan(&name, &status); err != nil {
			t.Fatal(err)
		}
		got[name] = kept{Status: status}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = s.Pool.Query(ctx, `SELECT name, count(*) FROM workload_events GROUP BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		k := got[name]
		k.Events = n
		got[name] = k
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPruneHistoryKeepsLiveState is --history-retention's contract: the
// rows of expired workloads and the events of ended (deleted or expired)
// ones go once older than the cut and dealt with by the log's retention
// (at or below through); ended ones younger than the cut, finished ones
// not yet expired, and every live workload of any age (its row and its
// whole history, a resubmitted name's earlier incarnations included)
// stay.
func TestPruneHistoryKeepsLiveState(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	now := t0.Add(1000 * time.Hour)
	cut := now.Add(-24 * time.Hour)
	old, young := cut.Add(-100*time.Hour), cut.Add(time.Hour)

	l := &log{}
	at := func(when time.Time) { l.recs[len(l.recs)-1].Event.Time = when }
	submit := func(name string, when time.Time) { l.submit("ns", name); at(when) }
	ev := func(typ events.Type, data any, when time.Time) { l.add(typ, data); at(when) }
	reserve := func(name string, when time.Time) {
		ev(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", name), Admission: admission(1000)}, when)
	}
	finish := func(name string, when time.Time) {
		ev(events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref("ns", name), Succeeded: true}, when)
	}
	wref := func(name string) *events.WorkloadRef { r := ref("ns", name); return &r }

	ev(events.ConfigApplied, &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "LocalQueue", Namespace: "ns", Name: "lq"},
		Object: []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)}, old)
	// Ended, older than the cut: gone.
	submit("old-deleted", old)
	reserve("old-deleted", old)
	ev(events.WorkloadDeleted, wref("old-deleted"), old)
	submit("old-expired", old)
	reserve("old-expired", old)
	finish("old-expired", old)
	ev(events.WorkloadExpired, wref("old-expired"), old)
	// Live, older than the cut: kept whole.
	submit("old-pending", old)
	submit("old-admitted", old)
	reserve("old-admitted", old)
	// A name deleted, and one expired, long ago and submitted again: the
	// live incarnation keeps the earlier ones' history too.
	submit("again-after-delete", old)
	ev(events.WorkloadDeleted, wref("again-after-delete"), old)
	submit("again-after-delete", old)
	submit("again-after-expiry", old)
	reserve("again-after-expiry", old)
	finish("again-after-expiry", old)
	ev(events.WorkloadExpired, wref("again-after-expiry"), old)
	submit("again-after-expiry", old)
	reserve("again-after-expiry", young)
	// Finished long ago but not expired yet (expiry, not this, ends it).
	submit("old-finished", old)
	reserve("old-finished", old)
	finish("old-finished", old)
	// Ended, younger than the cut: kept.
	submit("young-deleted", young)
	ev(events.WorkloadDeleted, wref("young-deleted"), young)
	submit("young-expired", young)
	reserve("young-expired", young)
	finish("young-expired", young)
	ev(events.WorkloadExpired, wref("young-expired"), young)
	// Live and young.
	submit("young-pending", young)
	through := uint64(len(l.recs))
	// Ended before the cut but after through (the log's retention has not
	// dealt with it yet): kept.
	submit("late-expired", old)
	reserve("late-expired", old)
	finish("late-expired", old)
	ev(events.WorkloadExpired, wref("late-expired"), old)
	submit("late-deleted", old)
	ev(events.WorkloadDeleted, wref("late-deleted"), old)
	last := uint64(len(l.recs))
	l.recs = append(l.recs,
		Record{Seq: last + 1, Parked: &Parked{Type: "x", Subject: "jq.ev.wl.ns.old-parked", Data: []byte("{"), Reason: "test"}},
		Record{Seq: last + 2, Parked: &Parked{Type: "x", Subject: "jq.ev.wl.ns.young-parked", Data: []byte("{"), Reason: "test"}})
	if n, err := s.Apply(ctx, l.recs); err != nil || n != len(l.recs) {
		t.Fatalf("applied %d of %d: %v", n, len(l.recs), err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE parked_events SET parked_at = $1 WHERE subject LIKE '%old-parked'`, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE parked_events SET parked_at = $1 WHERE subject LIKE '%young-parked'`, young); err != nil {
		t.Fatal(err)
	}

	live := []string{"old-pending", "old-admitted", "again-after-delete", "again-after-expiry", "young-pending"}
	type read struct {
		View    WorkloadView
		History []Event
	}
	readLive := func() map[string]read {
		m := map[string]read{}
		for _, name := range live {
			v, h, err := s.GetWorkload(ctx, "ns", name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m[name] = read{v, h}
		}
		return m
	}

	before := map[string]kept{
		"old-deleted":        {Events: 3},
		"old-expired":        {Status: StatusFinished, Events: 4},
		"old-pending":        {Status: StatusPending, Events: 1},
		"old-admitted":       {Status: StatusAdmitted, Events: 2},
		"again-after-delete": {Status: StatusPending, Events: 3},
		"again-after-expiry": {Status: StatusAdmitted, Events: 6},
		"old-finished":       {Status: StatusFinished, Events: 3},
		"young-deleted":      {Events: 2},
		"young-expired":      {Status: StatusFinished, Events: 4},
		"young-pending":      {Status: StatusPending, Events: 1},
		"late-expired":       {Status: StatusFinished, Events: 4},
		"late-deleted":       {Events: 2},
	}
	if d := cmp.Diff(before, keptState(t, s)); d != "" {
		t.Fatalf("before pruning (-want +got):\n%s", d)
	}
	liveBefore := readLive()

	p, err := s.PruneHistory(ctx, cut, through)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Pruned{Workloads: 1, Events: 3 + 4, Parked: 1}, p); d != "" {
		t.Errorf("pruned (-want +got):\n%s", d)
	}
	after := map[string]kept{}
	for name, k := range before {
		if name != "old-deleted" && name != "old-expired" {
			after[name] = k
		}
	}
	if d := cmp.Diff(after, keptState(t, s)); d != "" {
		t.Errorf("after pruning (-want +got):\n%s", d)
	}
	if d := cmp.Diff(liveBefore, readLive()); d != "" {
		t.Errorf("live workloads read back (-want +got):\n%s", d)
	}
	var parked []string
	rows, err := s.Pool.Query(ctx, `SELECT subject FROM parked_events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var subj string
		if err := rows.Scan(&subj); err != nil {
			t.Fatal(err)
		}
		parked = append(parked, subj)
	}
	if d := cmp.Diff([]string{"jq.ev.wl.ns.young-parked"}, parked); d != "" {
		t.Errorf("parked events (-want +got):\n%s", d)
	}

	// A second pass, with everything dealt with by the log and a cut past
	// every event, still keeps the live workloads whole.
	if _, err := s.PruneHistory(ctx, now, last+2); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(liveBefore, readLive()); d != "" {
		t.Errorf("live workloads after a cut past everything (-want +got):\n%s", d)
	}
	final := keptState(t, s)
	for _, name := range live {
		if final[name] != before[name] {
			t.Errorf("%s: %+v, want %+v", name, final[name], before[name])
		}
	}
	if d := cmp.Diff(kept{Status: StatusFinished, Events: 3}, final["old-finished"]); d != "" {
		t.Errorf("old-finished, not expired (-want +got):\n%s", d)
	}
}
