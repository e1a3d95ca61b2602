package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
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
	e, _ := randomEngine(t, seed)
	out := map[string]scheduler.Admission{}
	for k, w := range e.Workloads() {
		if w.Status == Admitted {
			out[k] = *w.Admission
		}
	}
	return out
}

// randomEngine is runRandom's engine at its end, with its world.
func randomEngine(t *testing.T, seed uint64) (*Engine, string) {
	rng := rand.New(rand.NewPCG(seed, 0))
	e := New()
	world := randomWorld(rng)
	apply(t, e, world)
	queues := strings.Count(world, "kind: LocalQueue")
	payloads := map[string]string{}
	n := 0
	for step := range 12 {
		for range rng.IntN(6) {
			wl := randomWorkload(rng, fmt.Sprintf("w%d", n), queues)
			submit(t, e, wl)
			payloads[workloadKey(t, wl)] = wl
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
		checkQuota(t, e, world, payloads)
	}
	return e, world
}

// checkQuota asserts the limits of nominal, borrowing and lending quota on
// usage recomputed independently of the engine's own accounting: from the
// configuration text and the submitted workload payloads, for the
// workloads the engine says are admitted, with their flavor assignment
// and admitted counts. An engine that under-counts usage therefore cannot
// satisfy it by agreeing with itself.
func checkQuota(t *testing.T, e *Engine, world string, payloads map[string]string) {
	t.Helper()
	cfg := parseWorld(t, world)
	usage := map[string]quota.Usage{} // per ClusterQueue
	for _, key := range sortedKeys(e.Workloads()) {
		w := e.Workload(key)
		if w.Status != Admitted {
			continue
		}
		ad := w.Admission
		cq, ok := cfg.queues[ad.ClusterQueue]
		if !ok {
			t.Fatalf("%s admitted to unknown ClusterQueue %q\n%s", key, ad.ClusterQueue, world)
		}
		if usage[ad.ClusterQueue] == nil {
			usage[ad.ClusterQueue] = quota.Usage{}
		}
		perPod, counts, minCounts := payloadRequests(t, payloads[key])
		for _, ps := range ad.PodSets {
			if ps.Count < minCounts[ps.Name] || ps.Count > counts[ps.Name] {
				t.Fatalf("%s podSet %s admitted with %d pods, allowed %d..%d", key, ps.Name, ps.Count, minCounts[ps.Name], counts[ps.Name])
			}
			flavor, ok := ps.Flavors[corev1.ResourceCPU]
			if !ok {
				t.Fatalf("%s podSet %s admitted without a cpu flavor: %v", key, ps.Name, ps.Flavors)
			}
			fr := quota.FlavorResource{Flavor: flavor, Resource: corev1.ResourceCPU}
			if _, ok := cq.limits[fr]; !ok {
				t.Fatalf("%s admitted on %v, which ClusterQueue %s does not have", key, fr, ad.ClusterQueue)
			}
			usage[ad.ClusterQueue][fr] += perPod[ps.Name] * int64(ps.Count)
		}
	}
	for name, cq := range cfg.queues {
		for fr, u := range usage[name] {
			l := cq.limits[fr]
			if cq.cohort == "" && u > l.Nominal {
				t.Fatalf("%s uses %d of %v without a cohort, nominal %d\n%s", name, u, fr, l.Nominal, world)
			}
			if l.BorrowingLimit != nil && u > l.Nominal+*l.BorrowingLimit {
				t.Fatalf("%s uses %d of %v, nominal %d + borrowing limit %d\n%s", name, u, fr, l.Nominal, *l.BorrowingLimit, world)
			}
		}
	}
	for _, cohort := range cfg.cohorts() {
		total, nominal, above, lendable := quota.Usage{}, quota.Usage{}, quota.Usage{}, quota.Usage{}
		for name, cq := range cfg.queues {
			if cq.cohort != cohort {
				continue
			}
			for fr, l := range cq.limits {
				nominal[fr] += l.Nominal
				lendable[fr] += l.Lendable()
				u := usage[name][fr]
				total[fr] += u
				above[fr] += max(0, u-l.Guaranteed())
			}
		}
		for fr, u := range total {
			if u > nominal[fr] {
				t.Fatalf("cohort %s uses %d of %v, more than its members' nominal quota %d\n%s", cohort, u, fr, nominal[fr], world)
			}
			if above[fr] > lendable[fr] {
				t.Fatalf("cohort %s: usage above guarantees %d of %v exceeds what members lend (%d)\n%s", cohort, above[fr], fr, lendable[fr], world)
			}
		}
	}
}

// world is the quota configuration as the property test reads it from the
// YAML itself, not from the engine.
type world struct {
	queues map[string]worldQueue
}

type worldQueue struct {
	cohort string
	limits map[quota.FlavorResource]quota.Limits
}

func (w world) cohorts() []string {
	seen := map[string]bool{}
	for _, cq := range w.queues {
		if cq.cohort != "" {
			seen[cq.cohort] = true
		}
	}
	return sortedKeys(seen)
}

func parseWorld(t *testing.T, text string) world {
	t.Helper()
	objs, err := api.Decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	w := world{queues: map[string]worldQueue{}}
	for _, o := range objs {
		cq, ok := o.(*api.ClusterQueue)
		if !ok {
			continue
		}
		q := worldQueue{cohort: cq.Spec.Cohort, limits: map[quota.FlavorResource]quota.Limits{}}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					l := quota.Limits{Nominal: r.NominalQuota.MilliValue()}
					if r.BorrowingLimit != nil {
						l.BorrowingLimit = ptr(r.BorrowingLimit.MilliValue())
					}
					if r.LendingLimit != nil {
						l.LendingLimit = ptr(r.LendingLimit.MilliValue())
					}
					q.limits[quota.FlavorResource{Flavor: f.Name, Resource: r.Name}] = l
				}
			}
		}
		w.queues[cq.Name] = q
	}
	return w
}

func ptr[T any](v T) *T { return &v }

// payloadRequests reads a submitted workload's per-pod cpu (milli-units,
// summed over its containers), count and minCount per podSet.
func payloadRequests(t *testing.T, text string) (perPod map[string]int64, counts, minCounts map[string]int32) {
	t.Helper()
	wl := decodeWorkload(t, text)
	perPod, counts, minCounts = map[string]int64{}, map[string]int32{}, map[string]int32{}
	for _, ps := range wl.Spec.PodSets {
		for _, c := range ps.Template.Spec.Containers {
			cpu := c.Resources.Requests[corev1.ResourceCPU]
			perPod[ps.Name] += cpu.MilliValue()
		}
		counts[ps.Name], minCounts[ps.Name] = ps.Count, ps.Count
		if ps.MinCount != nil {
			minCounts[ps.Name] = *ps.MinCount
		}
	}
	return perPod, counts, minCounts
}

func decodeWorkload(t *testing.T, text string) *api.Workload {
	t.Helper()
	objs, err := api.Decode([]byte(text))
	if err != nil || len(objs) != 1 {
		t.Fatalf("payload: %v (%d objects)", err, len(objs))
	}
	wl, ok := objs[0].(*api.Workload)
	if !ok {
		t.Fatalf("payload is a %T", objs[0])
	}
	return wl
}

func workloadKey(t *testing.T, text string) string {
	wl := decodeWorkload(t, text)
	return wl.Namespace + "/" + wl.Name
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
