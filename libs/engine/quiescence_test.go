package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// fullFingerprint recomputes, from scratch, what the incremental
// fingerprint of a run must equal: every pending workload's share, and
// every finished one's still queued.
func fullFingerprint(e *Engine) uint64 {
	var sum uint64
	for _, w := range e.pending {
		h, _ := e.hashPending(w)
		sum += h
	}
	for _, w := range e.finishedQueued {
		h, _ := e.hashPending(w)
		sum += h
	}
	return sum
}

// TestFingerprintFollowsEveryChange is issue 15's cause 4: the fingerprint
// that decides quiescence was updated only for a cycle's heads, victims
// and admissions, so a parked workload that an eviction moved back to its
// heap kept its old share, and a run could stop one cycle early, before
// the preemptor was admitted. After every cycle of every run, over random
// worlds with preemption, the incrementally kept fingerprint must equal
// one recomputed from the whole state.
func TestFingerprintFollowsEveryChange(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := New()
		world := preemptingWorld(rng)
		apply(t, e, world)
		queues := strings.Count(world, "kind: LocalQueue")
		cycles := 0
		e.afterCycle = func(fp uint64) {
			cycles++
			if want := fullFingerprint(e); fp != want {
				t.Fatalf("seed %d, cycle %d: the run's fingerprint %x is not the state's %x\n%s", seed, cycles, fp, want, world)
			}
		}
		n := 0
		for step := range 10 {
			for range rng.IntN(5) {
				submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", n), queues))
				n++
			}
			for _, k := range sortedKeys(e.Workloads()) {
				w := e.Workload(k)
				switch r := rng.IntN(8); {
				case w.Status == Admitted && r == 0:
					_ = e.Finish(k, t0)
				case w.Status == Pending && r == 1:
					_ = e.SetPriority(k, int32(rng.IntN(5)), t0)
				case step%4 == 3 && r == 2:
					_ = e.Delete(k, t0)
				}
			}
			e.RunToQuiescence(t0)
		}
	}
}

// TestQuiescenceAfterPreemptionAdmitsThePreemptor is cause 4's shape: a
// preemption frees quota for a parked workload and its preemptor; one run
// must go on until the preemptor is admitted, and settling again must
// change nothing.
func TestQuiescenceAfterPreemptionAdmitsThePreemptor(t *testing.T) {
	e := New()
	apply(t, e, `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
`)
	wl := func(name string, prio, cpu int) string {
		return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: ns}
spec:
  queueName: lq
  priority: %d
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "%d"}}}]}}
`, name, prio, cpu)
	}
	submit(t, e, wl("low", 0, 4))
	e.RunToQuiescence(t0)
	submit(t, e, wl("parked", 0, 2))
	e.RunToQuiescence(t0)
	if w := e.Workload("ns/parked"); w.Status != Pending || !e.queues.Lookup("cq").Parked("ns/parked") {
		t.Fatalf("ns/parked: %s, want parked", w.Status)
	}
	submit(t, e, wl("high", 10, 3))
	e.RunToQuiescence(t0)
	if w := e.Workload("ns/high"); w.Status != Admitted {
		t.Fatalf("ns/high: %s after one run, want admitted", w.Status)
	}
	before := admittedSet(e)
	e.Settle(t0)
	if after := admittedSet(e); after != before {
		t.Fatalf("settling again admitted %s, the run had stopped at %s", after, before)
	}
}

func admittedSet(e *Engine) string {
	var out []string
	for _, k := range sortedKeys(e.Workloads()) {
		if e.Workload(k).Status == Admitted {
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}

// preemptingWorld is randomWorld with preemption policies on some queues.
func preemptingWorld(rng *rand.Rand) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(randomWorld(rng), "\n") {
		b.WriteString(line)
		if strings.HasPrefix(line, "  queueingStrategy:") && rng.IntN(3) > 0 {
			within := []string{"Never", "LowerPriority", "LowerOrNewerEqualPriority"}[rng.IntN(3)]
			reclaim := []string{"Never", "LowerPriority", "Any"}[rng.IntN(3)]
			fmt.Fprintf(&b, "  preemption: {withinClusterQueue: %s, reclaimWithinCohort: %s}\n", within, reclaim)
		}
	}
	return b.String()
}

// TestRunToRestGoesOnWhereTheRuleStops: a workload's first attempt writes
// its Pending condition, an update that drops its retry state, so the
// attempt leaves the fingerprint as it found it. RunToQuiescence then ends
// on a repeated state with w5 pending though flavor f2 fits it (FORMAT.md's
// rule, which the simulator keeps); RunToRest goes on and admits it, as
// Kueue's scheduler, which never stops, does (conformance 205).
func TestRunToRestGoesOnWhereTheRuleStops(t *testing.T) {
	const world = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
  preemption: {withinClusterQueue: Never}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: f1
      resources: [{name: cpu, nominalQuota: "4"}, {name: memory, nominalQuota: 16Gi}]
    - name: f2
      resources: [{name: cpu, nominalQuota: "12"}, {name: memory, nominalQuota: 4Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
`
	wl := func(name string, count int, cpu, mem string) string {
		return fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: ns}
spec:
  queueName: lq
  podSets:
  - name: main
    count: %d
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "%s", memory: %s}}}]}}
`, name, count, cpu, mem)
	}
	for _, rest := range []bool{false, true} {
		e := New()
		apply(t, e, world)
		submit(t, e, wl("w1", 2, "2", "1Gi"))
		e.RunToQuiescence(t0)
		submit(t, e, wl("w4", 2, "2", "8Gi")+"---"+wl("w5", 1, "2", "2Gi"))
		if rest {
			e.RunToRest(t0)
		} else {
			e.RunToQuiescence(t0)
		}
		got := e.Workload("ns/w5").Status
		want := Pending
		if rest {
			want = Admitted
		}
		if got != want || e.Workload("ns/w4").Status != Pending || e.Workload("ns/w1").Status != Admitted {
			t.Errorf("rest %v: w1 %v w4 %v w5 %v, want w1 admitted, w4 pending, w5 %v", rest,
				e.Workload("ns/w1").Status, e.Workload("ns/w4").Status, got, want)
		}
	}
}
