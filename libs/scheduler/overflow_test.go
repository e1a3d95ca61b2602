package scheduler

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// TestAssignNeverWrapsRequests: a podSet whose per-pod request × count, or
// whose podSets' sum, does not fit int64 is NoFit with ExceedsMaxQuota,
// even in a queue with the largest possible quota, and one unit under the
// limit still fits. Before checked arithmetic, 2^62 × 4 wrapped to 0 and
// was admitted with no usage.
func TestAssignNeverWrapsRequests(t *testing.T) {
	fr := quota.FlavorResource{Flavor: "f", Resource: corev1.ResourceCPU}
	snap := func() (*Snapshot, *ClusterQueue) {
		cq := &ClusterQueue{Name: "q", Strategy: api.BestEffortFIFO,
			Groups:  []ResourceGroup{{Covered: []corev1.ResourceName{corev1.ResourceCPU}, Flavors: []string{"f"}}},
			GroupOf: map[corev1.ResourceName]int{corev1.ResourceCPU: 0},
			Limits:  map[quota.FlavorResource]quota.Limits{fr: {Nominal: math.MaxInt64}},
			Usage:   quota.Usage{}}
		s := &Snapshot{Flavors: map[string]*Flavor{"f": {Name: "f"}},
			ClusterQueues: map[string]*ClusterQueue{"q": cq}}
		s.LinkCohorts(nil)
		return s, cq
	}
	podSet := func(name string, perPod int64, count int32) PodSet {
		return PodSet{Name: name, Count: count, PerPod: map[corev1.ResourceName]int64{corev1.ResourceCPU: perPod}}
	}
	cases := []struct {
		name     string
		podSets  []PodSet
		wantMode Mode
		wantUse  int64
	}{
		{"product just under the limit", []PodSet{podSet("a", math.MaxInt64/4, 4)}, Fit, math.MaxInt64 / 4 * 4},
		{"product over the limit", []PodSet{podSet("a", math.MaxInt64/4+1, 4)}, NoFit, 0},
		{"product wrapping to zero", []PodSet{podSet("a", 1<<62, 4)}, NoFit, 0},
		{"sum of podSets just under", []PodSet{podSet("a", math.MaxInt64-1, 1), podSet("b", 1, 1)}, Fit, math.MaxInt64},
		{"sum of podSets over", []PodSet{podSet("a", math.MaxInt64, 1), podSet("b", 1, 1)}, NoFit, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, cq := snap()
			a := assignFlavors(s, cq, &Workload{Key: "ns/w", ClusterQueue: "q", PodSets: tc.podSets}, nil)
			if got := a.Mode(); got != tc.wantMode {
				t.Fatalf("mode %v, want %v (%s)", got, tc.wantMode, a.Message())
			}
			if tc.wantMode == NoFit {
				r := assignmentReason(&a, cq)
				if r == nil || r.Token != ExceedsMaxQuota {
					t.Fatalf("reason %+v, want %s", r, ExceedsMaxQuota)
				}
				return
			}
			if got := a.Usage[fr]; got != tc.wantUse {
				t.Errorf("usage %d, want %d", got, tc.wantUse)
			}
		})
	}
}

// TestFitsQuotaSaturatesLimits: nominal + borrowingLimit beyond int64 is
// treated as the largest limit (not a negative one that refuses all), and
// used + request beyond int64 exceeds it.
func TestFitsQuotaSaturatesLimits(t *testing.T) {
	fr := quota.FlavorResource{Flavor: "f", Resource: corev1.ResourceCPU}
	cq := func(used int64) *ClusterQueue {
		c := &ClusterQueue{Name: "q", Limits: map[quota.FlavorResource]quota.Limits{fr: {Nominal: math.MaxInt64 - 10, BorrowingLimit: ptr(math.MaxInt64)}},
			Usage: quota.Usage{fr: used}}
		c.Cohort = &Cohort{Name: "c", Requestable: quota.Usage{fr: math.MaxInt64}, Used: quota.Usage{fr: used}}
		return c
	}
	if m, _ := fitsQuota(cq(0), fr, math.MaxInt64, &status{}); m != Fit {
		t.Errorf("the whole saturated limit: %v, want Fit", m)
	}
	st := &status{}
	if m, _ := fitsQuota(cq(math.MaxInt64-5), fr, 10, st); m == Fit {
		t.Errorf("used+request beyond int64 must not fit")
	} else if b := st.first(); b == nil || b.shortfall <= 0 {
		t.Errorf("blocker %+v, want a positive shortfall", b)
	}
}
