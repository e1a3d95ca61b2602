package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

const podsReadyWorld = `
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: true, timeout: 5m, requeuingStrategy: {backoffLimitCount: 1}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "10"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: cq-a}
spec: {clusterQueue: cq-a}
`

// TestBlockAdmissionHoldsTheHead: while an admitted workload is not
// PodsReady nothing else is admitted; the held head keeps its reason and is
// admitted as soon as the blocker is ready.
func TestBlockAdmissionHoldsTheHead(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "first", 2)+"---\n"+cpuWorkload("cq-a", "second", 2))
	e.RunToQuiescence(t0)
	if got := e.Workload("cq-a/second"); got.Status != Pending || got.Reason == nil || got.Reason.Token != scheduler.WaitingForPodsReady {
		t.Fatalf("second: status %s reason %+v, want pending WaitingForPodsReady", got.Status, got.Reason)
	}
	submit(t, e, cpuWorkload("cq-a", "third", 1))
	e.RunToQuiescence(t0)
	if err := e.PodsReady("cq-a/first"); err != nil {
		t.Fatal(err)
	}
	e.RunToQuiescence(t0)
	want := map[string]Status{"cq-a/first": Admitted, "cq-a/second": Admitted, "cq-a/third": Pending}
	if d := cmp.Diff(want, statusOf(e)); d != "" {
		t.Errorf("after first is ready (-want +got):\n%s", d)
	}
}

// TestTimeoutFiresAtTheDeadline pins the inclusive deadline, the backoff
// requeue and the deactivation after backoffLimitCount, with the clock
// passed in.
func TestTimeoutFiresAtTheDeadline(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "w", 2))
	e.RunToQuiescence(t0)
	deadline := t0.Add(5 * time.Minute)
	if next, ok := e.NextTimer(); !ok || !next.Equal(deadline) {
		t.Fatalf("NextTimer = %v %v, want %v", next, ok, deadline)
	}
	e.FireTimers(deadline.Add(-time.Nanosecond))
	if e.Workload("cq-a/w").Status != Admitted {
		t.Fatal("evicted before the deadline")
	}
	e.FireTimers(deadline)
	w := e.Workload("cq-a/w")
	if w.Status != Pending || w.RequeueCount != 1 || !w.RequeueAt.Equal(deadline.Add(time.Minute)) {
		t.Fatalf("after deadline: %s count %d requeueAt %v", w.Status, w.RequeueCount, w.RequeueAt)
	}
	e.RunToQuiescence(deadline)
	if w.Status != Pending {
		t.Fatal("admitted during its backoff")
	}
	requeue := deadline.Add(time.Minute)
	if next, _ := e.NextTimer(); !next.Equal(requeue) {
		t.Fatalf("NextTimer = %v, want the end of the backoff %v", next, requeue)
	}
	e.FireTimers(requeue)
	e.RunToQuiescence(requeue)
	if w.Status != Admitted {
		t.Fatalf("not re-admitted after its backoff: %s %+v", w.Status, w.Reason)
	}
	e.FireTimers(requeue.Add(5 * time.Minute))
	if w.Status != Inactive {
		t.Fatalf("second timeout with backoffLimitCount 1: %s, want inactive", w.Status)
	}
	got := []string{}
	for _, ev := range e.DrainEvictions() {
		got = append(got, ev.Reason)
	}
	if d := cmp.Diff([]string{EvictedByPodsReadyTimeout, EvictedByDeactivation}, got); d != "" {
		t.Errorf("evictions (-want +got):\n%s", d)
	}
}

// TestReadyWorkloadNeverTimesOut: PodsReady stops the countdown.
func TestReadyWorkloadNeverTimesOut(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "w", 2))
	e.RunToQuiescence(t0)
	if err := e.PodsReady("cq-a/w"); err != nil {
		t.Fatal(err)
	}
	if next, ok := e.NextTimer(); ok {
		t.Fatalf("a timer remains at %v", next)
	}
	e.FireTimers(t0.Add(24 * time.Hour))
	if e.Workload("cq-a/w").Status != Admitted {
		t.Fatal("a ready workload was evicted")
	}
}

func statusOf(e *Engine) map[string]Status {
	out := map[string]Status{}
	for k, w := range e.Workloads() {
		out[k] = w.Status
	}
	return out
}
