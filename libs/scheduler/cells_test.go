package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// TestCandidatesFromKeysMatchRecords: a queue whose admitted workloads
// were listed by AddAdmitted and RemoveAdmitted filters candidates on the
// priorities and cell masks it keeps beside them; it lists exactly what
// reading every record lists (a list built by hand keeps none), after
// removals and re-additions, again once the masks are cached, and after
// LinkCohorts numbers the cells anew.
func TestCandidatesFromKeysMatchRecords(t *testing.T) {
	flavors := []string{"f0", "f1", "f9"}
	found, keyed := 0, 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 12))
		s := randomCohort(rng, 2+rng.IntN(4), 4+rng.IntN(12))
		names := sortedKeys(s.ClusterQueues)
		cq := s.ClusterQueues[names[rng.IntN(len(names))]]
		wl := pendingWorkload(rng, cq.Name, int(seed))
		// Before, at or after the admitted workloads' queue times.
		wl.QueueTime = t0.Add(time.Duration(rng.IntN(20)-2) * time.Millisecond)
		need := map[quota.FlavorResource]bool{}
		for _, f := range flavors {
			if rng.IntN(2) == 0 {
				need[quota.FlavorResource{Flavor: f, Resource: "cpu"}] = true
			}
		}
		want := sortedStrings(keys(candidates(cq, wl, need)))
		for _, m := range s.ClusterQueues {
			ws := m.Admitted
			m.Admitted = nil
			for _, w := range ws {
				m.AddAdmitted(w)
			}
			var out []*AdmittedWorkload
			for _, w := range ws {
				if rng.IntN(3) == 0 {
					m.RemoveAdmitted(w)
					out = append(out, w)
				}
			}
			for _, w := range out {
				m.AddAdmitted(w)
			}
			if len(m.Admitted) > 0 && m.admittedKeys() != nil {
				keyed++
			}
		}
		for i, step := range []string{"keys", "cached masks", "new cell table"} {
			if i == 2 {
				cohortOf := map[string]string{}
				for _, n := range names {
					cohortOf[n] = "c"
				}
				s.LinkCohorts(cohortOf)
			}
			if d := cmp.Diff(want, sortedStrings(keys(candidates(cq, wl, need)))); d != "" {
				t.Fatalf("seed %d, %s: candidates differ (-records +keys):\n%s", seed, step, d)
			}
		}
		found += len(want)
	}
	if found < 200 || keyed < 400 {
		t.Fatalf("only %d candidates listed, %d queues keyed; the generator needs tuning", found, keyed)
	}
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
