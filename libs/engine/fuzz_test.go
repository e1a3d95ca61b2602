package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzEngine drives the engine through random worlds and event sequences
// (submissions, finishes, deletions; see runRandom) chosen by the fuzzed
// seed. After every step no ClusterQueue or cohort may hold more than its
// quota allows, recomputed from the payloads (checkQuota); and the same
// inputs replayed must give the same decisions.
func FuzzEngine(f *testing.F) {
	for _, seed := range []uint64{0, 1, 7, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		first, second := runRandom(t, seed), runRandom(t, seed)
		if d := cmp.Diff(first, second); d != "" {
			t.Fatalf("seed %d: the same log gave other decisions (-first +second):\n%s", seed, d)
		}
	})
}
