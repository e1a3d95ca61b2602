package scorer

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// TestPlaceRanksAtMostMaxRankedPods: however large the admitted counts,
// Place ranks exactly MaxRankedPods pods over the whole admission and
// counts the rest as unranked; nothing is allocated per pod beyond that.
// Pods that request nothing fit every node for ever, the worst case: before
// the budget, a count of 2147483647 made the scorer rank (and allocate) one
// entry per pod and die out of memory on every restart.
func TestPlaceRanksAtMostMaxRankedPods(t *testing.T) {
	st := NewState()
	if err := st.Apply(flavorApplied("cpu", `{"pool":"cpu"}`, `[]`)); err != nil {
		t.Fatal(err)
	}
	sc, err := scoring.New(gpuScoring)
	if err != nil {
		t.Fatal(err)
	}
	free := "cpu=0,memory=0"
	cases := []struct {
		name         string
		counts       []int32
		wantRanked   []int
		wantUnranked []int32
	}{
		{"one podSet just under the budget", []int32{MaxRankedPods - 1}, []int{MaxRankedPods - 1}, []int32{0}},
		{"one podSet at the budget", []int32{MaxRankedPods}, []int{MaxRankedPods}, []int32{0}},
		{"one podSet one over", []int32{MaxRankedPods + 1}, []int{MaxRankedPods}, []int32{1}},
		{"the largest count", []int32{math.MaxInt32}, []int{MaxRankedPods}, []int32{math.MaxInt32 - MaxRankedPods}},
		{"the budget spans podSets", []int32{600, 600, 5}, []int{600, 400, 0}, []int32{0, 200, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var podSets []string
			var ad []scheduler.PodSetAdmission
			for i, c := range tc.counts {
				name := string(rune('a' + i))
				podSets = append(podSets, podSetJSON(name, int(c), free, ""))
				ad = append(ad, psa(name, c, map[corev1.ResourceName]string{"cpu": "cpu"}))
			}
			if err := st.Apply(submittedEvent("ns", "big", podSets...)); err != nil {
				t.Fatal(err)
			}
			got := Place(sc, st.Workloads["ns/big"], st.Flavors, &scheduler.Admission{ClusterQueue: "cq", PodSets: ad}, cluster())
			if len(got) != len(tc.counts) {
				t.Fatalf("%d podSet placements, want %d", len(got), len(tc.counts))
			}
			for i, p := range got {
				if len(p.Nodes) != tc.wantRanked[i] || p.Unranked != tc.wantUnranked[i] || p.Reason != "" {
					t.Errorf("podSet %s: %d ranked, %d unranked, reason %q; want %d, %d, none",
						p.Name, len(p.Nodes), p.Unranked, p.Reason, tc.wantRanked[i], tc.wantUnranked[i])
				}
			}
		})
	}
}
