package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

const preemptWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: cq-a}
spec: {clusterQueue: cq-a}
`

// TestPreemptorWaitsForItsVictims pins the preemption decision as a value:
// in the cycle that chooses victims, the preemptor is not admitted and
// carries WaitingForPreemptedWorkloads with Kueue's message; the
// preemption names each victim, its preemptor and the grounds.
func TestPreemptorWaitsForItsVictims(t *testing.T) {
	e := New()
	e.RecordDecisions()
	apply(t, e, preemptWorld)
	submit(t, e, cpuWorkload("cq-a", "low", 4))
	e.RunToQuiescence(t0)
	e.DrainDecisions()
	submit(t, e, cpuWorkloadPriority("cq-a", "high", 4, 10))
	res := e.Cycle(t0)
	if len(res.Admitted) != 0 {
		t.Fatalf("admitted %v in the preempting cycle", res.Admitted)
	}
	high := e.Workload("cq-a/high")
	if high.Reason == nil || high.Reason.Token != scheduler.WaitingForPreemptedWorkloads ||
		high.Reason.Message != "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor rf, 4 more needed. Pending the preemption of 1 workload(s)" {
		t.Fatalf("preemptor reason %+v", high.Reason)
	}
	var kinds []engineDecision
	for _, d := range e.DrainDecisions() {
		ed := engineDecision{Kind: d.Kind, Key: d.Key}
		for _, t := range d.Targets {
			ed.Victim, ed.Preemptor, ed.Grounds = t.Workload.Key, t.Preemptor, string(t.Kind)
		}
		kinds = append(kinds, ed)
	}
	want := []engineDecision{
		{Kind: DecidedPreemption, Key: "cq-a/high", Victim: "cq-a/low", Preemptor: "cq-a/high", Grounds: string(scheduler.InClusterQueue)},
		{Kind: DecidedInadmissible, Key: "cq-a/high"},
	}
	if d := cmp.Diff(want, kinds, cmp.Comparer(func(a, b engineDecision) bool { return a == b })); d != "" {
		t.Errorf("decisions (-want +got):\n%s", d)
	}
	if low := e.Workload("cq-a/low"); low.Status != Pending {
		t.Errorf("victim is %s after the preempting cycle, want pending (evicted at once)", low.Status)
	}
	e.RunToQuiescence(t0)
	if high.Status != Admitted || e.Workload("cq-a/low").Status != Pending {
		t.Errorf("after the victims left: high %s, low %s", high.Status, e.Workload("cq-a/low").Status)
	}
}

type engineDecision struct {
	Kind                            DecisionKind
	Key, Victim, Preemptor, Grounds string
}

func cpuWorkloadPriority(ns, name string, cpu, prio int) string {
	return strings.Replace(cpuWorkload(ns, name, cpu), "  queueName: lq\n", fmt.Sprintf("  queueName: lq\n  priority: %d\n", prio), 1)
}
