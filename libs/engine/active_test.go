package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSetActive: deactivating an admitted workload evicts it
// (InactiveWorkload) and frees its quota for the next; deactivating a
// pending one takes it out of its queue; reactivating puts it back.
func TestSetActive(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "a", 6)+"---\n"+cpuWorkload("cq-a", "b", 6)+"---\n"+cpuWorkload("cq-a", "c", 6))
	e.RunToQuiescence(t0)
	if d := cmp.Diff(map[string]Status{"cq-a/a": Admitted, "cq-a/b": Pending, "cq-a/c": Pending}, statusOf(e)); d != "" {
		t.Fatalf("before (-want +got):\n%s", d)
	}
	e.DrainEvictions()
	// b, pending, goes out of its queue: c is next.
	if err := e.SetActive("cq-a/b", false, t0); err != nil {
		t.Fatal(err)
	}
	if err := e.SetActive("cq-a/a", false, t0); err != nil {
		t.Fatal(err)
	}
	e.RunToQuiescence(t0)
	if d := cmp.Diff(map[string]Status{"cq-a/a": Inactive, "cq-a/b": Inactive, "cq-a/c": Admitted}, statusOf(e)); d != "" {
		t.Errorf("after deactivating a and b (-want +got):\n%s", d)
	}
	evs := e.DrainEvictions()
	if len(evs) != 1 || evs[0].Key != "cq-a/a" || evs[0].Reason != EvictedByDeactivation {
		t.Errorf("evictions: %+v, want a's InactiveWorkload", evs)
	}
	if w := e.Workload("cq-a/a"); w.Object.Spec.Active == nil || *w.Object.Spec.Active || w.Evictions != 1 {
		t.Errorf("a: active %v, evictions %d", w.Object.Spec.Active, w.Evictions)
	}
	// Reactivated, a waits for c's quota and is admitted when c finishes.
	if err := e.SetActive("cq-a/a", true, t0); err != nil {
		t.Fatal(err)
	}
	e.RunToQuiescence(t0)
	if got := e.Workload("cq-a/a").Status; got != Pending {
		t.Errorf("a reactivated: %s, want pending", got)
	}
	if err := e.Finish("cq-a/c", t0); err != nil {
		t.Fatal(err)
	}
	e.RunToQuiescence(t0)
	if d := cmp.Diff(map[string]Status{"cq-a/a": Admitted, "cq-a/b": Inactive, "cq-a/c": Finished}, statusOf(e)); d != "" {
		t.Errorf("after c finishes (-want +got):\n%s", d)
	}
	if err := e.SetActive("cq-a/nope", false, t0); err == nil {
		t.Error("SetActive of an unknown workload: no error")
	}
}

// TestDeactivationRequeuesParked: Kueue's workload controller handles an
// update that leaves a workload inactive, or changes a finished one, by
// requeueing the parked workloads of its LocalQueue's ClusterQueue and
// cohort (WorkloadReconciler.Update, status finished or not active:
// QueueAssociatedInadmissibleWorkloadsAfter), as when a workload finishes.
func TestDeactivationRequeuesParked(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "a", 6)+"---\n"+cpuWorkload("cq-a", "b", 6)+"---\n"+cpuWorkload("cq-a", "big", 100))
	e.RunToQuiescence(t0)
	wantParked := func(when string, want int) {
		t.Helper()
		if _, _, got, _ := e.queues.Footprint(); got != want {
			t.Errorf("parked %s: %d, want %d", when, got, want)
		}
	}
	wantParked("at the start (b and big)", 2)
	// b, pending, is deactivated: big goes back to the heap.
	must(t, e.SetActive("cq-a/b", false, t0))
	wantParked("after b is deactivated", 0)
	e.RunToQuiescence(t0)
	must(t, e.Finish("cq-a/a", t0))
	e.RunToQuiescence(t0)
	wantParked("after a finished (big)", 1)
	// a, finished, is deactivated: an update of a finished workload.
	must(t, e.SetActive("cq-a/a", false, t0))
	wantParked("after finished a is deactivated", 0)
	e.RunToQuiescence(t0)
	// The same value again is no update: nothing is requeued.
	must(t, e.SetActive("cq-a/a", false, t0))
	wantParked("after a no-op deactivation", 1)
}
