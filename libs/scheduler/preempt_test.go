package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var preemptPolicies = []api.PreemptionPolicy{api.PreemptionNever, api.PreemptionLowerPriority, api.PreemptionLowerOrNewerEqualPriority}
var reclaimPolicies = []api.PreemptionPolicy{api.PreemptionNever, api.PreemptionLowerPriority, api.PreemptionAny}

// randomCohort builds a snapshot of queues in one cohort sharing flavors
// f0 and f1 for cpu, with random limits, policies and admitted workloads
// that respect the quota (each admitted only while the cohort has room).
func randomCohort(rng *rand.Rand, queues, admitted int) *Snapshot {
	s := &Snapshot{Flavors: map[string]*Flavor{}, ClusterQueues: map[string]*ClusterQueue{}}
	flavors := []string{"f0", "f1"}
	for _, f := range flavors {
		s.Flavors[f] = &Flavor{Name: f}
	}
	cohortOf := map[string]string{}
	for q := range queues {
		cq := &ClusterQueue{
			Name:              fmt.Sprintf("cq%d", q),
			Strategy:          api.BestEffortFIFO,
			NamespaceSelector: labels.Everything(),
			Groups:            []ResourceGroup{{Covered: []corev1.ResourceName{"cpu"}, Flavors: flavors, LabelKeys: sets.New[string]()}},
			GroupOf:           map[corev1.ResourceName]int{"cpu": 0},
			Limits:            map[quota.FlavorResource]quota.Limits{},
			Fungibility:       api.FlavorFungibility{WhenCanBorrow: api.FungibilityBorrow, WhenCanPreempt: api.FungibilityPreempt},
			Usage:             quota.Usage{},
			Generation:        1,
		}
		cq.Preemption = api.ClusterQueuePreemption{WithinClusterQueue: preemptPolicies[rng.IntN(3)], ReclaimWithinCohort: reclaimPolicies[rng.IntN(3)]}
		if cq.Preemption.ReclaimWithinCohort != api.PreemptionNever && rng.IntN(3) == 0 {
			cq.Preemption.BorrowWithinCohort = &api.BorrowWithinCohort{Policy: api.BorrowWithinCohortLowerPriority}
			if rng.IntN(2) == 0 {
				th := int32(rng.IntN(3))
				cq.Preemption.BorrowWithinCohort.MaxPriorityThreshold = &th
			}
		}
		for _, f := range flavors {
			l := quota.Limits{Nominal: int64(rng.IntN(8)) * 1000}
			if rng.IntN(2) == 0 {
				v := int64(rng.IntN(5)) * 1000
				l.BorrowingLimit = &v
			}
			if rng.IntN(2) == 0 {
				v := int64(rng.IntN(int(l.Nominal/1000)+1)) * 1000
				l.LendingLimit = &v
			}
			cq.Limits[quota.FlavorResource{Flavor: f, Resource: "cpu"}] = l
		}
		s.ClusterQueues[cq.Name] = cq
		cohortOf[cq.Name] = "c"
	}
	s.LinkCohorts(cohortOf)
	names := sortedKeys(s.ClusterQueues)
	for i := range admitted {
		cq := s.ClusterQueues[names[rng.IntN(len(names))]]
		fr := quota.FlavorResource{Flavor: flavors[rng.IntN(2)], Resource: "cpu"}
		v := int64(1+rng.IntN(3)) * 1000
		st := &status{}
		if m, _ := fitsQuota(cq, fr, v, st); m != Fit {
			continue
		}
		w := &AdmittedWorkload{Key: fmt.Sprintf("ns/a%d", i), ClusterQueue: cq.Name, Priority: int32(rng.IntN(4)),
			QueueTime: t0.Add(time.Duration(i) * time.Millisecond), AdmittedAt: t0.Add(time.Duration(i) * time.Second),
			Usage: quota.Usage{fr: v}}
		cq.Admitted = append(cq.Admitted, w)
		cq.Usage[fr] += v
		s.LinkCohorts(cohortOf)
	}
	return s
}

func pendingWorkload(rng *rand.Rand, cq string, i int) *Workload {
	return &Workload{Key: fmt.Sprintf("ns/p%d", i), ClusterQueue: cq, Priority: int32(rng.IntN(4)),
		NamespaceLabels: labels.Set{}, QueueTime: t0.Add(time.Hour),
		PodSets: []PodSet{{Name: "main", Count: 1, PerPod: map[corev1.ResourceName]int64{"cpu": int64(1+rng.IntN(4)) * 1000}}}}
}

// TestPropertyPreemptionVictims checks every victim set the core chooses:
// each victim is allowed by the policy that selected it, the preemptor fits
// once they are gone, no single victim could be spared, and the snapshot is
// left untouched.
func TestPropertyPreemptionVictims(t *testing.T) {
	decisions := 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := randomCohort(rng, 2+rng.IntN(4), 4+rng.IntN(12))
		names := sortedKeys(s.ClusterQueues)
		cq := s.ClusterQueues[names[rng.IntN(len(names))]]
		wl := pendingWorkload(rng, cq.Name, int(seed))
		a := assignFlavors(s, cq, wl, nil)
		if a.Mode() != Preempt {
			continue
		}
		before := snapshotUsage(s)
		victims, allowBorrowing := chooseVictims(cq, wl, &a)
		if d := cmp.Diff(before, snapshotUsage(s)); d != "" {
			t.Fatalf("seed %d: choosing victims mutated the snapshot:\n%s", seed, d)
		}
		if len(victims) == 0 {
			continue
		}
		decisions++
		for _, v := range victims {
			checkPolicy(t, seed, cq, wl, v)
		}
		sim := newPreemptionSim(cq)
		for _, v := range victims {
			sim.add(v, -1)
		}
		if !sim.fits(a.Usage, allowBorrowing) {
			t.Fatalf("seed %d: preemptor %v does not fit after evicting %d victims", seed, a.Usage, len(victims))
		}
		for _, v := range victims {
			sim.add(v, 1)
			if sim.fits(a.Usage, allowBorrowing) {
				t.Fatalf("seed %d: victim %s (%s, prio %d) is not needed", seed, v.Key, v.ClusterQueue, v.Priority)
			}
			sim.add(v, -1)
		}
	}
	if decisions < 40 {
		t.Fatalf("only %d preemption decisions exercised; the generator needs tuning", decisions)
	}
}

func checkPolicy(t *testing.T, seed uint64, cq *ClusterQueue, wl *Workload, v *AdmittedWorkload) {
	t.Helper()
	p := cq.Preemption
	if v.ClusterQueue == cq.Name {
		switch p.WithinClusterQueue {
		case api.PreemptionLowerPriority:
			if v.Priority >= wl.Priority {
				t.Fatalf("seed %d: LowerPriority evicted %s with priority %d >= %d", seed, v.Key, v.Priority, wl.Priority)
			}
		case api.PreemptionLowerOrNewerEqualPriority:
			if v.Priority > wl.Priority || v.Priority == wl.Priority && !wl.QueueTime.Before(v.QueueTime) {
				t.Fatalf("seed %d: LowerOrNewerEqualPriority evicted %s (priority %d)", seed, v.Key, v.Priority)
			}
		default:
			t.Fatalf("seed %d: withinClusterQueue Never evicted %s", seed, v.Key)
		}
		return
	}
	switch p.ReclaimWithinCohort {
	case api.PreemptionLowerPriority:
		if v.Priority >= wl.Priority {
			t.Fatalf("seed %d: reclaim LowerPriority evicted %s with priority %d >= %d", seed, v.Key, v.Priority, wl.Priority)
		}
	case api.PreemptionAny:
	default:
		t.Fatalf("seed %d: reclaimWithinCohort Never evicted %s of %s", seed, v.Key, v.ClusterQueue)
	}
}

func snapshotUsage(s *Snapshot) map[string]quota.Usage {
	out := map[string]quota.Usage{}
	for n, cq := range s.ClusterQueues {
		out["cq/"+n] = cq.Usage.Clone()
	}
	for n, co := range s.Cohorts {
		out["cohort/"+n] = co.Used.Clone()
	}
	return out
}

// BenchmarkChooseVictims chooses victims for one workload in a cohort of
// 10 ClusterQueues holding 5,000 admitted workloads.
func BenchmarkChooseVictims(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 42))
	s := &Snapshot{Flavors: map[string]*Flavor{"f0": {Name: "f0"}}, ClusterQueues: map[string]*ClusterQueue{}}
	cohortOf := map[string]string{}
	fr := quota.FlavorResource{Flavor: "f0", Resource: "cpu"}
	for q := range 10 {
		cq := &ClusterQueue{Name: fmt.Sprintf("cq%d", q), NamespaceSelector: labels.Everything(),
			Groups:  []ResourceGroup{{Covered: []corev1.ResourceName{"cpu"}, Flavors: []string{"f0"}, LabelKeys: sets.New[string]()}},
			GroupOf: map[corev1.ResourceName]int{"cpu": 0}, Limits: map[quota.FlavorResource]quota.Limits{fr: {Nominal: 500_000}},
			Preemption:  api.ClusterQueuePreemption{WithinClusterQueue: api.PreemptionLowerPriority, ReclaimWithinCohort: api.PreemptionAny},
			Fungibility: api.FlavorFungibility{WhenCanBorrow: api.FungibilityBorrow, WhenCanPreempt: api.FungibilityPreempt},
			Usage:       quota.Usage{}}
		s.ClusterQueues[cq.Name] = cq
		cohortOf[cq.Name] = "c"
	}
	// cq0 is empty; the others hold 5,000 one-cpu workloads between them,
	// borrowing all of cq0's quota, so cq0's workload must reclaim.
	for i := range 5000 {
		cq := s.ClusterQueues[fmt.Sprintf("cq%d", 1+i%9)]
		w := &AdmittedWorkload{Key: fmt.Sprintf("ns/a%05d", i), ClusterQueue: cq.Name, Priority: int32(rng.IntN(10)),
			QueueTime: t0.Add(time.Duration(i) * time.Millisecond), AdmittedAt: t0.Add(time.Duration(i) * time.Second),
			Usage: quota.Usage{fr: 1000}}
		cq.Admitted = append(cq.Admitted, w)
		cq.Usage[fr] += 1000
	}
	s.LinkCohorts(cohortOf)
	cq := s.ClusterQueues["cq0"]
	wl := &Workload{Key: "ns/big", ClusterQueue: "cq0", Priority: 5, QueueTime: t0.Add(time.Hour), NamespaceLabels: labels.Set{},
		PodSets: []PodSet{{Name: "main", Count: 64, PerPod: map[corev1.ResourceName]int64{"cpu": 1000}}}}
	a := assignFlavors(s, cq, wl, nil)
	if a.Mode() != Preempt {
		b.Fatalf("mode %v, want Preempt", a.Mode())
	}
	var victims int
	for b.Loop() {
		victims = len(preemptionTargets(cq, wl, &a))
	}
	if victims != 64 {
		b.Fatalf("%d victims, want 64", victims)
	}
	b.ReportMetric(float64(victims), "victims")
}
