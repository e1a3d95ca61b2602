package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// TestKeptSnapshotMatchesRebuilt: the snapshot kept from cycle to cycle,
// brought up to date by admissions, releases, evictions and priority
// changes, equals one built from scratch from the engine's state, after
// every step of random runs with preemption on.
func TestKeptSnapshotMatchesRebuilt(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := New()
		world := strings.ReplaceAll(randomWorld(rng), "  namespaceSelector: {}\n",
			"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
		apply(t, e, world)
		queues := strings.Count(world, "kind: LocalQueue")
		n := 0
		for step := range 10 {
			for range rng.IntN(6) {
				submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", n), queues))
				n++
			}
			for _, k := range sortedKeys(e.Workloads()) {
				if e.Workload(k).Status != Admitted {
					continue
				}
				switch rng.IntN(6) {
				case 0:
					_ = e.Finish(k, t0)
				case 1:
					_ = e.Delete(k, t0)
				case 2:
					_ = e.SetPriority(k, int32(rng.IntN(3)), t0)
				}
			}
			e.RunToQuiescence(t0)
			kept := snapshotState(e.Snapshot())
			fresh, _ := e.buildSnapshot()
			if d := cmp.Diff(snapshotState(fresh), kept); d != "" {
				t.Fatalf("seed %d step %d: kept snapshot differs from a rebuilt one (-rebuilt +kept):\n%s", seed, step, d)
			}
		}
	}
}

// snapshotState is what a cycle reads of a snapshot, in a comparable form:
// the admitted lists as sorted keys with the record's priority.
func snapshotState(s *scheduler.Snapshot) map[string]any {
	out := map[string]any{}
	for n, cq := range s.ClusterQueues {
		var admitted []string
		for _, a := range cq.Admitted {
			admitted = append(admitted, fmt.Sprintf("%s@%d", a.Key, a.Priority))
		}
		slices.Sort(admitted)
		out["cq/"+n] = []any{cq.Usage.Clone(), cq.Generation, admitted}
	}
	for n, co := range s.Cohorts {
		var members []string
		for _, m := range co.Members {
			members = append(members, m.Name)
		}
		out["cohort/"+n] = []any{co.Used.Clone(), co.Requestable.Clone(), co.Generation, members}
	}
	return out
}

// TestSnapshotWhileACycleWaits: while a cycle waits for PodsReady it reads
// the kept snapshot, so asking for a snapshot meanwhile (as counterfactual
// explanations do) gets a new one with the changes since, and leaves the
// waiting cycle's view as it was.
func TestSnapshotWhileACycleWaits(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "zero", 1))
	e.RunToQuiescence(t0)
	if err := e.PodsReady("cq-a/zero"); err != nil {
		t.Fatal(err)
	}
	submit(t, e, cpuWorkload("cq-a", "first", 2)+"---\n"+cpuWorkload("cq-a", "second", 2))
	e.RunToQuiescence(t0)
	if e.pass == nil || e.snap == nil {
		t.Fatal("no cycle waits for PodsReady")
	}
	held := snapshotState(e.snap)
	if err := e.Finish("cq-a/zero", t0); err != nil {
		t.Fatal(err)
	}
	got := e.Snapshot()
	if d := cmp.Diff(held, snapshotState(e.snap)); d != "" {
		t.Errorf("the waiting cycle's snapshot changed (-before +after):\n%s", d)
	}
	fresh, _ := e.buildSnapshot()
	if d := cmp.Diff(snapshotState(fresh), snapshotState(got)); d != "" {
		t.Errorf("the snapshot asked for meanwhile is not up to date (-want +got):\n%s", d)
	}
}
