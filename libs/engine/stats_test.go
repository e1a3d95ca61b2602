package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/quota"
)

const statsWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "3"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: idle}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: missing
      resources: [{name: cpu, nominalQuota: "1"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: held}
spec:
  namespaceSelector: {}
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "1"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: c}
spec: {clusterQueue: held}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: a}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: b}
spec: {clusterQueue: idle}
`

// TestStatsAreWhatKueueReports: counts, usage and statuses as Kueue's
// gauges report them, for an active queue with a parked workload, a
// queue inactive for a missing flavor, and a deleted queue still holding
// quota.
func TestStatsAreWhatKueueReports(t *testing.T) {
	e := New()
	apply(t, e, statsWorld)
	// a/w1 and a/w2 (1 cpu each) fit in cq's 3; a/big (5) never does and
	// is parked; b/w waits in idle, inactive for its missing flavor, whose
	// heads are never taken (Misconfigured); c/w waits in held, stopped
	// (Suspended); a/lost names no queue.
	submit(t, e, cpuWorkload("a", "w1", 1))
	submit(t, e, cpuWorkload("a", "w2", 1))
	submit(t, e, cpuWorkload("a", "big", 5))
	submit(t, e, cpuWorkload("b", "w", 1))
	submit(t, e, cpuWorkload("c", "w", 1))
	submit(t, e, strings.Replace(cpuWorkload("a", "lost", 1), "queueName: lq", "queueName: nope", 1))
	e.RunToQuiescence(t0)

	st := e.Stats()
	cpu := quota.FlavorResource{Flavor: "rf", Resource: corev1.ResourceCPU}
	want := []ClusterQueueStats{
		{Name: "cq", Status: "active", PendingInadmissible: 1, Reserving: 2,
			Quotas: []QuotaStats{{FlavorResource: cpu, Nominal: 3000}}, Usage: quota.Usage{cpu: 2000}},
		{Name: "held", Status: "pending", PendingActive: 1,
			Quotas: []QuotaStats{{FlavorResource: cpu, Nominal: 1000}}, Usage: quota.Usage{}},
		{Name: "idle", Status: "pending", PendingActive: 1,
			Quotas: []QuotaStats{{FlavorResource: quota.FlavorResource{Flavor: "missing", Resource: corev1.ResourceCPU}, Nominal: 1000}}, Usage: quota.Usage{}},
	}
	if d := cmp.Diff(want, st.ClusterQueues); d != "" {
		t.Errorf("ClusterQueues (-want,+got):\n%s", d)
	}
	wantLQ := []LocalQueueStats{
		{Namespace: "a", Name: "lq", ClusterQueue: "cq", Active: true, PendingInadmissible: 1, Reserving: 2, Usage: quota.Usage{cpu: 2000}},
		{Namespace: "b", Name: "lq", ClusterQueue: "idle", PendingActive: 1, Usage: quota.Usage{}},
		{Namespace: "c", Name: "lq", ClusterQueue: "held", PendingActive: 1, Usage: quota.Usage{}},
	}
	if d := cmp.Diff(wantLQ, st.LocalQueues); d != "" {
		t.Errorf("LocalQueues (-want,+got):\n%s", d)
	}
	wantUn := map[UnadmittedKey]int{
		{ClusterQueue: "held", Namespace: "c", LocalQueue: "lq", Cause: "Suspended"}:     1,
		{ClusterQueue: "cq", Namespace: "a", LocalQueue: "lq", Cause: "ExceedsMaxQuota"}: 1,
		{ClusterQueue: "idle", Namespace: "b", LocalQueue: "lq", Cause: "Misconfigured"}: 1,
		{ClusterQueue: "", Namespace: "a", LocalQueue: "nope", Cause: "Misconfigured"}:   1,
	}
	if d := cmp.Diff(wantUn, st.Unadmitted); d != "" {
		t.Errorf("Unadmitted (-want,+got):\n%s", d)
	}

	// Deleted while w1 and w2 hold its quota: terminating, no spec.
	if err := e.DeleteConfig("ClusterQueue", "", "cq", t0); err != nil {
		t.Fatal(err)
	}
	got := e.Stats().ClusterQueues[0] // cq, then held and idle
	if d := cmp.Diff(ClusterQueueStats{Name: "cq", Status: "terminating", Reserving: 2, Usage: quota.Usage{cpu: 2000}}, got); d != "" {
		t.Errorf("deleted cq (-want,+got):\n%s", d)
	}
}

// BenchmarkStats reads the gauges off an engine holding 10,000 workloads
// (the admission service does so at most every 100 ms).
func BenchmarkStats(b *testing.B) {
	e := New()
	apply(b, e, statsWorld)
	for i := range 10_000 {
		submit(b, e, cpuWorkload("a", fmt.Sprint("w", i), 1))
	}
	e.RunToQuiescence(t0)
	for b.Loop() {
		e.Stats()
	}
}

// statsAgreeWithAWalk panics unless Stats, which reads the sums kept as
// workloads are admitted and released, equals the gauges computed by
// walking every workload (statsByWalk). The package's tests call it at
// the start of every run (checkStats).
func statsAgreeWithAWalk(e *Engine) {
	if d := cmp.Diff(statsByWalk(e), e.Stats()); d != "" {
		panic(fmt.Sprintf("Stats differs from a walk over every workload (-walk +Stats):\n%s", d))
	}
}

// statsByWalk computes Stats' workload counts and usages from every
// workload's own record, independently of the sums the engine keeps.
func statsByWalk(e *Engine) Stats {
	st := e.Stats()
	cqs := map[string]*ClusterQueueStats{}
	for i := range st.ClusterQueues {
		cq := &st.ClusterQueues[i]
		cq.PendingActive, cq.PendingInadmissible, cq.Reserving, cq.Usage = 0, 0, 0, quota.Usage{}
		cqs[cq.Name] = cq
	}
	lqs := map[[2]string]*LocalQueueStats{}
	for i := range st.LocalQueues {
		lq := &st.LocalQueues[i]
		lq.PendingActive, lq.PendingInadmissible, lq.Reserving, lq.Usage = 0, 0, 0, quota.Usage{}
		lqs[[2]string{lq.Namespace, lq.Name}] = lq
	}
	st.Unadmitted = map[UnadmittedKey]int{}
	for key, w := range e.workloads {
		lq := lqs[[2]string{w.Object.Namespace, w.Object.Spec.QueueName}]
		switch w.Status {
		case Admitted:
			u := w.Admission.TotalUsage()
			if cq := cqs[w.Admission.ClusterQueue]; cq != nil {
				cq.Reserving++
				cq.Usage.Add(u)
			}
			if lq != nil {
				lq.Reserving++
				lq.Usage.Add(u)
			}
		case Pending:
			if q := e.queues.Lookup(w.queuedIn); w.queuedIn != "" && q != nil {
				parked := q.Parked(key)
				for _, c := range []*int{pendingOf(cqs[w.queuedIn], parked), pendingOfLQ(lq, parked)} {
					if c != nil {
						*c++
					}
				}
			}
			st.Unadmitted[UnadmittedKey{ClusterQueue: w.Info.ClusterQueue, Namespace: w.Object.Namespace,
				LocalQueue: w.Object.Spec.QueueName, Cause: e.cause(w)}]++
		case Inactive:
			st.Unadmitted[UnadmittedKey{ClusterQueue: w.Info.ClusterQueue, Namespace: w.Object.Namespace,
				LocalQueue: w.Object.Spec.QueueName, Cause: "Deactivated"}]++
		}
	}
	// Stats reports the cells in use.
	for _, cq := range cqs {
		cq.Usage = inUse(cq.Usage)
	}
	for _, lq := range lqs {
		lq.Usage = inUse(lq.Usage)
	}
	return st
}

func pendingOf(cq *ClusterQueueStats, parked bool) *int {
	switch {
	case cq == nil:
		return nil
	case parked:
		return &cq.PendingInadmissible
	}
	return &cq.PendingActive
}

func pendingOfLQ(lq *LocalQueueStats, parked bool) *int {
	switch {
	case lq == nil:
		return nil
	case parked:
		return &lq.PendingInadmissible
	}
	return &lq.PendingActive
}
