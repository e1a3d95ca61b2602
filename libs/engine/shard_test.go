package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// lockstep is N sharded engines run side by side, each deciding its own
// trees and applying its peers' decisions as facts, as sharded admission
// services do through the log.
type lockstep []*Engine

func newLockstep(n int) lockstep {
	l := make(lockstep, n)
	for i := range l {
		l[i] = New()
		l[i].RecordDecisions()
		l[i].SetShard(Shard{Index: i, Count: n}, nil)
	}
	return l
}

// run runs every shard to quiescence in turn, each shard's decisions
// reaching the others before they run, until no shard decides anything.
func (l lockstep) run(t *testing.T) {
	for range 10 {
		quiet := true
		for i, e := range l {
			e.RunToQuiescence(t0)
			ds := e.DrainDecisions()
			e.DrainEvictions()
			for _, d := range ds {
				if d.Kind != DecidedInadmissible {
					quiet = false
				}
				for j, peer := range l {
					if j != i {
						applyFact(peer, d)
					}
				}
			}
		}
		if quiet {
			return
		}
	}
	t.Fatal("shards did not settle")
}

// applyFact applies a decision of another shard, as replay.Apply does
// with the event it is published as (and, for a preemption, with the
// evictions the preemptor publishes).
func applyFact(e *Engine, d Decision) {
	switch d.Kind {
	case DecidedAdmission:
		e.ApplyAdmission(d.Key, *d.Admission, t0)
	case DecidedInadmissible:
		e.NoteReason(d.Key, *d.Reason)
	case DecidedEviction:
		e.ApplyEviction(d.Key, Eviction{Reason: d.EvictionReason}, t0)
	case DecidedPreemption:
		for _, v := range d.Targets {
			e.ApplyEviction(v.Workload.Key, Eviction{Reason: EvictedByPreemption, Kind: v.Kind, PreemptorCQ: v.PreemptorCQ}, t0)
		}
	}
	e.DrainEvictions()
}

// outcome is what a run decided about a workload. Pending reasons are
// left out: the message (and at times the token) of a retried workload
// depends on how many runs the log's batches caused, sharded or not
// (Settle twice unsharded changes them too).
type outcome struct {
	Status    Status
	Admission *scheduler.Admission
}

func outcomes(e *Engine) map[string]outcome {
	out := map[string]outcome{}
	for k, w := range e.Workloads() {
		o := outcome{Status: w.Status, Admission: w.Admission}
		out[k] = o
	}
	return out
}

// runSharded drives one random scenario through the unsharded engine and
// through n shards in lockstep, comparing every workload's status,
// admission and pending reason after every step.
func runSharded(t *testing.T, seed uint64, n int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	world := randomWorld(rng)
	if seed%2 == 0 {
		world = strings.ReplaceAll(world, "  namespaceSelector: {}\n",
			"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
	}
	one := New()
	shards := newLockstep(n)
	apply(t, one, world)
	for _, e := range shards {
		apply(t, e, world)
	}
	queues := strings.Count(world, "kind: LocalQueue")
	w := 0
	for step := range 12 {
		for range rng.IntN(6) {
			wl := randomWorkload(rng, fmt.Sprintf("w%d", w), queues)
			w++
			created := lastCreated
			submit(t, one, wl)
			for _, e := range shards {
				lastCreated = created
				submit(t, e, wl)
			}
		}
		if step%3 == 2 {
			for _, k := range sortedKeys(one.Workloads()) {
				if one.Workload(k).Status == Admitted && rng.IntN(3) == 0 {
					finish := rng.IntN(2) == 0
					for _, e := range append(lockstep{one}, shards...) {
						if finish {
							_ = e.Finish(k, t0)
						} else {
							_ = e.Delete(k, t0)
						}
					}
				}
			}
		}
		one.RunToQuiescence(t0)
		shards.run(t)
		want := outcomes(one)
		for i, e := range shards {
			if d := cmp.Diff(want, outcomes(e)); d != "" {
				t.Fatalf("seed %d, %d shards, step %d: shard %d's replica differs from the unsharded run (-one +sharded):\n%s\nworld:\n%s",
					seed, n, step, i, d, world)
			}
		}
	}
}

// TestShardsInLockstepDecideAsOne: for random worlds of cohorts and
// standalone ClusterQueues, with and without preemption, the shards'
// decisions together are exactly the unsharded engine's.
func TestShardsInLockstepDecideAsOne(t *testing.T) {
	for seed := range uint64(200) {
		for _, n := range []int{2, 3} {
			runSharded(t, seed, n)
		}
	}
}

// TestTreeOwnerIsStable pins the hash: instances of different builds must
// agree on who owns what.
func TestTreeOwnerIsStable(t *testing.T) {
	got := []int{TreeOwner("team-a", "x", 2), TreeOwner("team-b", "x", 2), TreeOwner("", "cq1", 3), TreeOwner("", "cq1", 1)}
	if want := []int{TreeOwner("team-a", "other", 2), TreeOwner("team-b", "", 2), TreeOwner("cq1", "", 3), 0}; !cmp.Equal(got, want) {
		t.Fatalf("owners %v, want %v", got, want)
	}
	// Pinned against FNV-1a written out by hand:
	if got, want := TreeOwner("team-a", "", 1000), fnvOwner("team-a", 1000); got != want {
		t.Fatalf("TreeOwner(team-a, 1000) = %d, want %d", got, want)
	}
}

// fnvOwner is FNV-1a written out, independent of hash/fnv.
func fnvOwner(s string, n int) int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return int(h % uint64(n))
}
