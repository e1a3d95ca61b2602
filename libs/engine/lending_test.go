package engine

import (
	"fmt"
	"strings"
	"testing"
)

// cohortYAML renders one cohort of ClusterQueues with a single flavor
// "rf"; each spec is "name nominal [bl=N] [ll=N]".
func cohortYAML(specs ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n")
	for _, s := range specs {
		f := strings.Fields(s)
		extra := ""
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			name := map[string]string{"bl": "borrowingLimit", "ll": "lendingLimit"}[k]
			extra += fmt.Sprintf(", %s: %q", name, v)
		}
		fmt.Fprintf(&b, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  cohort: c
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources:
      - {name: cpu, nominalQuota: %[2]q%[3]s}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: %[1]s}
spec: {clusterQueue: %[1]s}
`, f[0], f[1], extra)
	}
	return b.String()
}

func cpuWorkload(ns, name string, cpu int) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: %s}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "%d"}}
`, name, ns, cpu)
}

// TestCohortCapacityFollowsKEP1224 pins the most cq-a can hold in each case
// of KEP-1224's test plan (nominal 5 everywhere): it admits exactly that
// much, and one more unit waits.
func TestCohortCapacityFollowsKEP1224(t *testing.T) {
	cases := []struct {
		name   string
		queues []string
		max    int
	}{
		{"no lending limits: everything unused is borrowable", []string{"cq-a 5", "cq-b 5"}, 10},
		{"b lends 2, a has no borrowing limit", []string{"cq-a 5", "cq-b 5 ll=2"}, 7},
		{"b lends 2, a may borrow 1", []string{"cq-a 5 bl=1", "cq-b 5 ll=2"}, 6},
		{"b lends 2, c lends all, a unbounded", []string{"cq-a 5", "cq-b 5 ll=2", "cq-c 5"}, 12},
		{"b lends 2, c lends all, a may borrow 4", []string{"cq-a 5 bl=4", "cq-b 5 ll=2", "cq-c 5"}, 9},
		{"b lends 2, c lends 1, a unbounded", []string{"cq-a 5", "cq-b 5 ll=2", "cq-c 5 ll=1"}, 8},
		{"b lends 2, c lends 1, a may borrow 2", []string{"cq-a 5 bl=2", "cq-b 5 ll=2", "cq-c 5 ll=1"}, 7},
		{"own lending limit never limits the owner", []string{"cq-a 5 ll=0", "cq-b 5 ll=0"}, 5},
		{"borrowing limit 0 keeps a at nominal", []string{"cq-a 5 bl=0", "cq-b 5"}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, probe := range []struct {
				cpu   int
				admit bool
			}{{tc.max, true}, {tc.max + 1, false}} {
				e := New()
				apply(t, e, cohortYAML(tc.queues...))
				submit(t, e, cpuWorkload("cq-a", "w", probe.cpu))
				e.RunToQuiescence(t0)
				if got := e.Workload("cq-a/w").Status == Admitted; got != probe.admit {
					t.Errorf("%d cpu: admitted=%v, want %v (reason %+v)", probe.cpu, got, probe.admit, e.Workload("cq-a/w").Reason)
				}
			}
		})
	}
}

// TestOthersUsageCountsOnlyAboveTheirGuarantee: usage of cq-b inside its
// guaranteed (unlent) part does not shrink what cq-a may borrow.
func TestOthersUsageCountsOnlyAboveTheirGuarantee(t *testing.T) {
	cases := []struct {
		name  string
		bUses int
		aMax  int
	}{
		{"b within its guarantee", 3, 7},
		{"b one above its guarantee", 4, 6},
		{"b at nominal", 5, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, probe := range []struct {
				cpu   int
				admit bool
			}{{tc.aMax, true}, {tc.aMax + 1, false}} {
				e := New()
				apply(t, e, cohortYAML("cq-a 5", "cq-b 5 ll=2"))
				submit(t, e, cpuWorkload("cq-b", "b", tc.bUses))
				e.RunToQuiescence(t0)
				submit(t, e, cpuWorkload("cq-a", "a", probe.cpu))
				e.RunToQuiescence(t0)
				if e.Workload("cq-b/b").Status != Admitted {
					t.Fatalf("cq-b/b not admitted: %+v", e.Workload("cq-b/b").Reason)
				}
				if got := e.Workload("cq-a/a").Status == Admitted; got != probe.admit {
					t.Errorf("a=%d cpu: admitted=%v, want %v", probe.cpu, got, probe.admit)
				}
			}
		})
	}
}
