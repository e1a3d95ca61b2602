package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// randomWorld renders a random but valid configuration: up to 3 flavors,
// up to 6 ClusterQueues in up to 2 cohorts (or none), with random nominal
// quotas, borrowing and lending limits, strategies and fungibility.
func randomWorld(rng *rand.Rand) string {
	var b strings.Builder
	nf := 1 + rng.IntN(3)
	for f := range nf {
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f%d}\n", f)
	}
	for q := range 1 + rng.IntN(6) {
		cohort := []string{"", "c0", "c1"}[rng.IntN(3)]
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq%d}\nspec:\n", q)
		if cohort != "" {
			fmt.Fprintf(&b, "  cohort: %s\n", cohort)
		}
		fmt.Fprintf(&b, "  namespaceSelector: {}\n  queueingStrategy: %s\n", []string{"StrictFIFO", "BestEffortFIFO"}[rng.IntN(2)])
		fmt.Fprintf(&b, "  flavorFungibility: {whenCanBorrow: %s}\n", []string{"Borrow", "TryNextFlavor"}[rng.IntN(2)])
		b.WriteString("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n")
		for _, f := range rng.Perm(nf)[:1+rng.IntN(nf)] {
			nominal := rng.IntN(11)
			fmt.Fprintf(&b, "    - name: f%d\n      resources:\n      - {name: cpu, nominalQuota: \"%d\"", f, nominal)
			if cohort != "" && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, ", borrowingLimit: \"%d\"", rng.IntN(6))
			}
			if cohort != "" && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, ", lendingLimit: \"%d\"", rng.IntN(nominal+1))
			}
			b.WriteString("}\n")
		}
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns%d}\nspec: {clusterQueue: cq%d}\n", q, q)
	}
	return b.String()
}

func randomWorkload(rng *rand.Rand, name string, queues int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: ns%d}\nspec:\n  queueName: lq\n  priority: %d\n  podSets:\n",
		name, rng.IntN(queues), rng.IntN(3))
	for p := range 1 + rng.IntN(2) {
		count := 1 + rng.IntN(3)
		fmt.Fprintf(&b, "  - name: ps%d\n    count: %d\n", p, count)
		if p == 0 && count > 1 && rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "    minCount: %d\n", 1+rng.IntN(count-1))
		}
		fmt.Fprintf(&b, "    template:\n      spec:\n        containers:\n        - name: c\n          resources: {requests: {cpu: \"%dm\"}}\n", 500*(1+rng.IntN(8)))
	}
	return b.String()
}

// runRandom drives a random world through submissions, finishes and
// deletions, checking the quota invariants after every step, and returns
// the final admissions for the determinism check.
func runRandom(t *testing.T, seed uint64) map[string]scheduler.Admission {
	rng := rand.New(rand.NewPCG(seed, 0))
	e := New()
	world := randomWorld(rng)
	apply(t, e, world)
	queues := strings.Count(world, "kind: LocalQueue")
	n := 0
	for step := range 12 {
		for range rng.IntN(6) {
			submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", n), queues))
			n++
		}
		if step%3 == 2 {
			for _, k := range sortedKeys(e.Workloads()) {
				if e.Workload(k).Status == Admitted && rng.IntN(3) == 0 {
					if rng.IntN(2) == 0 {
						_ = e.Finish(k, t0)
					} else {
						_ = e.Delete(k, t0)
					}
				}
			}
		}
		e.RunToQuiescence(t0)
		checkQuota(t, e, world)
	}
	out := map[string]scheduler.Admission{}
	for k, w := range e.Workloads() {
		if w.Status == Admitted {
			out[k] = *w.Admission
		}
	}
	return out
}

// checkQuota asserts the limits of nominal, borrowing and lending quota.
func checkQuota(t *testing.T, e *Engine, world string) {
	t.Helper()
	snap := e.Snapshot()
	for name, cq := range snap.ClusterQueues {
		for fr, u := range cq.Usage {
			l := cq.Limits[fr]
			if cq.Cohort == nil && u > l.Nominal {
				t.Fatalf("%s uses %d of %v without a cohort, nominal %d\n%s", name, u, fr, l.Nominal, world)
			}
			if l.BorrowingLimit != nil && u > l.Nominal+*l.BorrowingLimit {
				t.Fatalf("%s uses %d of %v, nominal %d + borrowing limit %d\n%s", name, u, fr, l.Nominal, *l.BorrowingLimit, world)
			}
		}
	}
	for name, co := range snap.Cohorts {
		above := quota.Usage{}
		for _, m := range co.Members {
			for fr, u := range m.Usage {
				above[fr] += max(0, u-m.Limits[fr].Guaranteed())
			}
		}
		for fr, u := range above {
			if u > co.Requestable[fr] {
				t.Fatalf("cohort %s: usage above guarantees %d of %v exceeds what members lend (%d)\n%s", name, u, fr, co.Requestable[fr], world)
			}
		}
	}
}

func TestPropertyUsageNeverExceedsLimits(t *testing.T) {
	for seed := range uint64(300) {
		runRandom(t, seed)
	}
}

func TestPropertySameInputsSameDecisions(t *testing.T) {
	for seed := range uint64(50) {
		first, second := runRandom(t, seed), runRandom(t, seed)
		if d := cmp.Diff(first, second); d != "" {
			t.Fatalf("seed %d: decisions differ (-first +second):\n%s", seed, d)
		}
	}
}

// TestScheduleDoesNotMutateSnapshot copies the snapshot's quota state,
// decides, and fails on any change.
func TestScheduleDoesNotMutateSnapshot(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		e := New()
		world := randomWorld(rng)
		apply(t, e, world)
		for i := range 20 {
			submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", i), strings.Count(world, "kind: LocalQueue")))
		}
		e.RunToQuiescence(t0)
		for i := range 5 {
			submit(t, e, randomWorkload(rng, fmt.Sprintf("x%d", i), strings.Count(world, "kind: LocalQueue")))
		}
		snap := e.Snapshot()
		before := quotaState(snap)
		heads := e.queues.Heads()
		scheduler.Schedule(snap, heads, scheduler.Options{})
		if d := cmp.Diff(before, quotaState(snap)); d != "" {
			t.Fatalf("seed %d: Schedule mutated its snapshot (-before +after):\n%s", seed, d)
		}
	}
}

func quotaState(s *scheduler.Snapshot) map[string]any {
	out := map[string]any{}
	for n, cq := range s.ClusterQueues {
		out["cq/"+n] = []any{cq.Usage.Clone(), cq.Generation, len(cq.Limits)}
	}
	for n, co := range s.Cohorts {
		out["cohort/"+n] = []any{co.Used.Clone(), co.Requestable.Clone(), co.Generation, len(co.Members)}
	}
	return out
}
