package scheduler

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// TestCandidatesBitSetsMatchHashing: testing candidates against the cells
// they need as bit sets over the snapshot's numbered cells lists exactly
// the candidates that looking each cell up in their usage lists, including
// workloads holding a zero amount or a cell the table does not number.
func TestCandidatesBitSetsMatchHashing(t *testing.T) {
	flavors := []string{"f0", "f1", "f9"} // no queue has limits for f9
	found := 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 11))
		s := randomCohort(rng, 2+rng.IntN(4), 4+rng.IntN(12))
		for _, cq := range s.ClusterQueues {
			for _, w := range cq.Admitted {
				if rng.IntN(3) == 0 {
					w.Usage[quota.FlavorResource{Flavor: flavors[rng.IntN(3)], Resource: "cpu"}] = int64(rng.IntN(2)) * 1000
				}
			}
		}
		names := sortedKeys(s.ClusterQueues)
		cq := s.ClusterQueues[names[rng.IntN(len(names))]]
		wl := pendingWorkload(rng, cq.Name, int(seed))
		need := map[quota.FlavorResource]bool{}
		for _, f := range flavors {
			if rng.IntN(2) == 0 {
				need[quota.FlavorResource{Flavor: f, Resource: "cpu"}] = true
			}
		}
		if cq.cells == nil {
			t.Fatalf("seed %d: LinkCohorts numbered no cells", seed)
		}
		withBits := keys(candidates(cq, wl, need))
		for _, m := range s.ClusterQueues {
			m.cells = nil
		}
		hashed := keys(candidates(cq, wl, need))
		if d := cmp.Diff(hashed, withBits); d != "" {
			t.Fatalf("seed %d: candidates differ (-hashing +bit sets):\n%s", seed, d)
		}
		found += len(hashed)
	}
	if found < 200 {
		t.Fatalf("only %d candidates listed; the generator needs tuning", found)
	}
}

func keys(ws []*AdmittedWorkload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Key)
	}
	return out
}
