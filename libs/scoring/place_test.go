package scoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func placed(node string, fitPlus int64) Placement {
	return Placement{Node: node, Score: NodeScore{Node: node, FitPlus: fitPlus, Scarce: 100, Total: fitPlus + 100}}
}

func unschedulable(r Reason, res corev1.ResourceName, count, total int) Placement {
	return Placement{Unschedulable: &Unschedulable{Reason: r, Resource: res, Count: count, Total: total}}
}

func TestPlace(t *testing.T) {
	taint := []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	most := Config{FitPlus: fit("cpu", MostAllocated, 1)}
	least := Config{FitPlus: fit("cpu", LeastAllocated, 1)}
	cpu1 := Pod{Requests: res("cpu", "1")}
	cases := []struct {
		name  string
		cfg   Config
		pod   Pod
		count int
		nodes []Node
		want  []Placement
	}{
		{
			name: "most allocated binpacks a node until full, then the next",
			cfg:  most, pod: cpu1, count: 4,
			nodes: []Node{
				{Name: "b", Allocatable: res("cpu", "4")},
				{Name: "a", Allocatable: res("cpu", "4"), Requested: res("cpu", "2")},
			},
			want: []Placement{placed("a", 75), placed("a", 100), placed("b", 25), placed("b", 50)},
		},
		{
			name: "least allocated spreads, ties by node name, then runs out",
			cfg:  least, pod: cpu1, count: 5,
			nodes: []Node{{Name: "b", Allocatable: res("cpu", "2")}, {Name: "a", Allocatable: res("cpu", "2")}},
			want: []Placement{
				placed("a", 50), placed("b", 50), placed("a", 0), placed("b", 0),
				unschedulable(InsufficientResource, "cpu", 2, 2),
			},
		},
		{
			name: "every remaining pod reports the same failure",
			cfg:  least, pod: cpu1, count: 3,
			nodes: []Node{{Name: "a", Allocatable: res("cpu", "1")}},
			want: []Placement{
				placed("a", 0),
				unschedulable(InsufficientResource, "cpu", 1, 1),
				unschedulable(InsufficientResource, "cpu", 1, 1),
			},
		},
		{
			name: "infeasible nodes are skipped even when they rank higher",
			cfg:  most, pod: cpu1, count: 1,
			nodes: []Node{
				{Name: "tainted", Taints: taint, Allocatable: res("cpu", "1")},
				{Name: "free", Allocatable: res("cpu", "8")},
			},
			want: []Placement{placed("free", 12)},
		},
		{
			name: "the most frequent failed filter is reported",
			cfg:  most, pod: Pod{Requests: res("cpu", "2"), NodeSelector: map[string]string{"pool": "x"}}, count: 1,
			nodes: []Node{
				{Name: "t1", Labels: map[string]string{"pool": "x"}, Taints: taint},
				{Name: "t2", Labels: map[string]string{"pool": "x"}, Taints: taint},
				{Name: "l", Labels: map[string]string{"pool": "y"}},
				{Name: "r", Labels: map[string]string{"pool": "x"}, Allocatable: res("cpu", "1")},
			},
			want: []Placement{unschedulable(UntoleratedTaint, "", 2, 4)},
		},
		{
			name: "equally frequent failures go to the smaller token",
			cfg:  most, pod: Pod{Requests: res("cpu", "2"), NodeSelector: map[string]string{"pool": "x"}}, count: 1,
			nodes: []Node{
				{Name: "l", Labels: map[string]string{"pool": "y"}},
				{Name: "r", Labels: map[string]string{"pool": "x"}, Allocatable: res("cpu", "1")},
			},
			want: []Placement{unschedulable(InsufficientResource, "cpu", 1, 2)},
		},
		{
			name: "no nodes at all",
			cfg:  most, pod: cpu1, count: 1,
			want: []Placement{unschedulable(NoNodes, "", 0, 0)},
		},
		{
			name: "zero pods place nothing",
			cfg:  most, pod: cpu1, count: 0,
			nodes: []Node{{Name: "a", Allocatable: res("cpu", "1")}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustNew(t, tc.cfg).Place(&tc.pod, tc.count, tc.nodes)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestCharge(t *testing.T) {
	cases := []struct {
		name string
		pod  Pod
		want Resources
	}{
		{name: "without containers the charge is the requests", pod: Pod{Requests: res("cpu", "1", "nvidia.com/gpu", "1")},
			want: res("cpu", "1", "nvidia.com/gpu", "1")},
		{name: "keyless containers add the cpu and memory defaults", pod: Pod{Requests: res("cpu", "1"),
			Containers: []Resources{res("cpu", "1"), res(), res("memory", "0")}},
			want: Resources{"cpu": 1200, "memory": 2 * DefaultMemoryRequest}},
		{name: "explicit zeros are charged zero", pod: Pod{Requests: res("cpu", "0", "memory", "0"),
			Containers: []Resources{res("cpu", "0", "memory", "0")}},
			want: Resources{"cpu": 0, "memory": 0}},
		{name: "untracked names are not charged", pod: Pod{Requests: Resources{"gpu": 1, "pods": 1}}, want: Resources{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.pod.Charge()); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestUnschedulableString(t *testing.T) {
	u := Unschedulable{Reason: InsufficientResource, Resource: "cpu", Count: 2, Total: 3}
	if got, want := u.String(), "0/3 nodes are available: 2 InsufficientResource cpu"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
