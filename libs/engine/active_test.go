package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSetActive: deactivating an admitted workload evicts it
// (InactiveWorkload) and frees its quota for the next; deactivating a
// pending one takes it out of its queue, and Kueue reports it evicted
// too; reactivating puts it back.
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
	// Kueue's workload controller marks both evicted (InactiveWorkload),
	// b although it never held quota.
	wantEvictions(t, e, "cq-a/b InactiveWorkload", "cq-a/a InactiveWorkload")
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

// TestInactiveSubmission: a workload submitted with spec.active false is
// never queued. Kueue's workload controller marks it evicted
// (InactiveWorkload) at once, and handles that status update as any
// update of an inactive workload: the parked workloads of its
// LocalQueue's ClusterQueue and cohort are requeued.
func TestInactiveSubmission(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "a", 6)+"---\n"+cpuWorkload("cq-a", "big", 100))
	e.RunToQuiescence(t0)
	e.DrainEvictions()
	if _, _, parked, _ := e.queues.Footprint(); parked != 1 {
		t.Fatalf("parked at the start: %d, want 1 (big)", parked)
	}
	submit(t, e, idleWorkload)
	if _, _, parked, _ := e.queues.Footprint(); parked != 0 {
		t.Errorf("parked after the inactive submission: %d, want 0", parked)
	}
	wantEvictions(t, e, "cq-a/idle InactiveWorkload")
	if st := e.Workload("cq-a/idle").Status; st != Inactive {
		t.Errorf("idle: %s, want inactive", st)
	}
}

// TestLateLocalQueueListsInactive: a LocalQueue created after an
// inactive workload lists it, as Kueue's Manager.AddLocalQueue lists every
// workload without quota; the scheduler admits it, and it is evicted
// again (InactiveWorkload) at once, holding no quota after the cycle.
// The engine records that eviction as a decision for admission to
// publish; an engine that reads it back (a standby, a replica) takes the
// workload out of its queue too, as ApplyDeactivation does. The same
// holds for an inactive workload that finished: Kueue's workload
// controller looks at spec.active first.
func TestLateLocalQueueListsInactive(t *testing.T) {
	for _, finished := range []bool{false, true} {
		t.Run(fmt.Sprintf("finished=%v", finished), func(t *testing.T) { lateLocalQueueListsInactive(t, finished) })
	}
}

func lateLocalQueueListsInactive(t *testing.T, finished bool) {
	world := strings.Replace(podsReadyWorld, "enable: true", "enable: false", 1)
	world = world[:strings.LastIndex(world, "---")]
	lq := "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: cq-a}\nspec: {clusterQueue: cq-a}\n"
	decider, replica := New(), New()
	decider.RecordDecisions()
	for _, e := range []*Engine{decider, replica} {
		apply(t, e, world)
		submit(t, e, idleWorkload)
		if finished {
			must(t, e.Finish("cq-a/idle", t0))
		}
		e.RunToQuiescence(t0)
		e.DrainEvictions()
		apply(t, e, lq)
	}
	queued := func(e *Engine) int { q, _, p, _ := e.queues.Footprint(); return q + p }
	if got := queued(replica); got != 1 {
		t.Fatalf("queued in the replica once the LocalQueue exists: %d, want 1 (idle, listed)", got)
	}
	var admitted []string
	decider.ObserveCycles(func(res CycleResult) { admitted = append(admitted, res.Admitted...) })
	decider.RunToQuiescence(t0)
	if d := cmp.Diff([]string{"cq-a/idle"}, admitted); d != "" {
		t.Errorf("admitted by the cycle (-want +got):\n%s", d)
	}
	wantEvictions(t, decider, "cq-a/idle InactiveWorkload")
	var decided []string
	for _, d := range decider.DrainDecisions() {
		decided = append(decided, fmt.Sprintf("%s %s %s", d.Kind, d.Key, d.EvictionReason))
	}
	if d := cmp.Diff([]string{"Evicted cq-a/idle InactiveWorkload"}, decided); d != "" {
		t.Errorf("decisions (-want +got):\n%s", d)
	}
	want := Inactive
	if finished {
		want = Finished
	}
	if w := decider.Workload("cq-a/idle"); w.Status != want || w.Admission != nil || queued(decider) != 0 {
		t.Errorf("idle after the cycle: %s, admission %v, queued %d; want %s, none, 0", w.Status, w.Admission, queued(decider), want)
	}
	if n := len(decider.state("cq-a").admitted); n != 0 {
		t.Errorf("workloads holding cq-a's quota after the cycle: %d, want 0", n)
	}
	// The replica reads the eviction back.
	replica.ApplyDeactivation("cq-a/idle", t0)
	if got := queued(replica); got != 0 {
		t.Errorf("queued in the replica after the eviction is read back: %d, want 0", got)
	}
	var again []string
	replica.ObserveCycles(func(res CycleResult) { again = append(again, res.Admitted...) })
	replica.RunToQuiescence(t0)
	if len(again) != 0 {
		t.Errorf("the replica admits %v after reading the eviction back, want nothing", again)
	}
}

// wantEvictions checks the evictions the engine recorded since the last
// drain, as "key reason", in order.
func wantEvictions(t *testing.T, e *Engine, want ...string) {
	t.Helper()
	var got []string
	for _, ev := range e.DrainEvictions() {
		got = append(got, ev.Key+" "+ev.Reason)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("evictions (-want +got):\n%s", d)
	}
}

// idleWorkload is a workload submitted inactive to cq-a's LocalQueue.
const idleWorkload = `apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: idle, namespace: cq-a}
spec:
  queueName: lq
  active: false
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}
`
