package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestFingerprintRehashesWhatReleasesChange: after every cycle of random
// runs with preemption, rehashing every pending workload that has a retry
// state (what a run did after each eviction before it rehashed only the
// released cohorts' shares hashed with a retry state) changes nothing.
func TestFingerprintRehashesWhatReleasesChange(t *testing.T) {
	checked := 0
	for seed := range uint64(80) {
		rng := rand.New(rand.NewPCG(seed, 3))
		e := New()
		world := strings.ReplaceAll(randomWorld(rng), "  namespaceSelector: {}\n",
			"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
		apply(t, e, world)
		e.afterCycle = func(fp uint64) {
			full := fp
			for _, w := range e.pending {
				if w.Info.LastTried != nil && w.hashEpoch == e.fpEpoch {
					h, _ := e.hashPending(w)
					full += h - w.hash
					checked++
				}
			}
			if full != fp {
				t.Fatalf("seed %d: a share left stale after a cycle", seed)
			}
		}
		queues := strings.Count(world, "kind: LocalQueue")
		n := 0
		for range 8 {
			for range rng.IntN(8) {
				submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", n), queues))
				n++
			}
			for _, k := range sortedKeys(e.Workloads()) {
				if e.Workload(k).Status == Admitted && rng.IntN(5) == 0 {
					_ = e.Finish(k, t0)
				}
			}
			e.RunToQuiescence(t0)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d shares checked; the generator needs tuning", checked)
	}
}
