package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestSameTried: retry states are the same only with equal generations and
// indexes, a nil slice or map told from an empty one (the engine persists
// the difference).
func TestSameTried(t *testing.T) {
	idx := func(ms ...map[corev1.ResourceName]int) []map[corev1.ResourceName]int { return ms }
	base := &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 1, "memory": -1}), ClusterQueueGen: 2, CohortGen: 3}
	cases := []struct {
		name string
		b    *TriedFlavors
		want bool
	}{
		{"equal", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"memory": -1, "cpu": 1}), ClusterQueueGen: 2, CohortGen: 3}, true},
		{"nil", nil, false},
		{"queue generation", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 1, "memory": -1}), ClusterQueueGen: 3, CohortGen: 3}, false},
		{"cohort generation", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 1, "memory": -1}), ClusterQueueGen: 2, CohortGen: 4}, false},
		{"index value", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 0, "memory": -1}), ClusterQueueGen: 2, CohortGen: 3}, false},
		{"index key", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 1, "pods": -1}), ClusterQueueGen: 2, CohortGen: 3}, false},
		{"more podSets", &TriedFlavors{Index: idx(map[corev1.ResourceName]int{"cpu": 1, "memory": -1}, nil), ClusterQueueGen: 2, CohortGen: 3}, false},
	}
	for _, tc := range cases {
		if got := sameTried(base, tc.b); got != tc.want {
			t.Errorf("%s: sameTried = %v, want %v", tc.name, got, tc.want)
		}
	}
	empty := &TriedFlavors{Index: idx(map[corev1.ResourceName]int{})}
	if sameTried(empty, &TriedFlavors{Index: idx(nil)}) || sameTried(&TriedFlavors{}, &TriedFlavors{Index: []map[corev1.ResourceName]int{}}) {
		t.Error("a nil map or slice is the same as an empty one")
	}
	if !sameTried(nil, nil) || !sameTried(empty, &TriedFlavors{Index: idx(map[corev1.ResourceName]int{})}) {
		t.Error("equal states differ")
	}
}
