package scoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScore(t *testing.T) {
	cpuMem := Config{FitPlus: fit("cpu", LeastAllocated, 1, "memory", LeastAllocated, 1)}
	cases := []struct {
		name string
		cfg  Config
		pod  Pod
		node Node
		want NodeScore
	}{
		{
			name: "koordinator test: half-used GPU node (66+87+2*75)/4",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{Requests: res("cpu", "16", "memory", "32Gi", "nvidia.com/gpu", "2", "ephemeral-storage", "10Gi")},
			node: Node{Allocatable: res("cpu", "96", "memory", "512Gi", "nvidia.com/gpu", "8", "ephemeral-storage", "100Gi"),
				Requested: res("cpu", "16", "memory", "32Gi", "nvidia.com/gpu", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "resource scores are floored before weighting: (66+33)/2",
			cfg:  cpuMem,
			pod:  Pod{Requests: res("cpu", "1", "memory", "2")},
			node: Node{Allocatable: res("cpu", "3", "memory", "3")},
			want: NodeScore{FitPlus: 49, Scarce: 100, Total: 149},
		},
		{
			name: "integer arithmetic: 1/10 free is 10, where float gives 9",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1)},
			pod:  Pod{Requests: res("cpu", "900m")},
			node: Node{Allocatable: res("cpu", "1")},
			want: NodeScore{FitPlus: 10, Scarce: 100, Total: 110},
		},
		{
			name: "most allocated clamps over capacity to 100",
			cfg:  Config{FitPlus: fit("cpu", MostAllocated, 1)},
			pod:  Pod{Requests: res("cpu", "2")},
			node: Node{Allocatable: res("cpu", "4"), Requested: res("cpu", "3")},
			want: NodeScore{FitPlus: 100, Scarce: 100, Total: 200},
		},
		{
			name: "least allocated over capacity is 0",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1)},
			pod:  Pod{Requests: res("cpu", "2")},
			node: Node{Allocatable: res("cpu", "4"), Requested: res("cpu", "3")},
			want: NodeScore{FitPlus: 0, Scarce: 100, Total: 100},
		},
		{
			name: "least allocated exactly full is 0",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1)},
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4"), Requested: res("cpu", "3")},
			want: NodeScore{FitPlus: 0, Scarce: 100, Total: 100},
		},
		{
			name: "resource missing on the node scores 0 and its weight counts: (87+87+0)/4",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{Requests: res("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1")},
			node: Node{Allocatable: res("cpu", "8", "memory", "8Gi")},
			want: NodeScore{FitPlus: 43, Scarce: 100, Total: 143},
		},
		{
			name: "zero allocatable scores 0 for most allocated too",
			cfg:  Config{FitPlus: fit("nvidia.com/gpu", MostAllocated, 1)},
			pod:  Pod{Requests: res("nvidia.com/gpu", "1")},
			node: Node{Allocatable: res("nvidia.com/gpu", "0")},
			want: NodeScore{FitPlus: 0, Scarce: 100, Total: 100},
		},
		{
			name: "resource weight 0 drops the resource",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 0, "memory", LeastAllocated, 1)},
			pod:  Pod{Requests: res("cpu", "3", "memory", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "all resource weights 0 give 100",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 0, "memory", MostAllocated, 0)},
			pod:  Pod{Requests: res("cpu", "3", "memory", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "4")},
			want: NodeScore{FitPlus: 100, Scarce: 100, Total: 200},
		},
		{
			name: "configured resource the pod does not request is not scored",
			cfg:  cpuMem,
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "4"), Requested: res("memory", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "nothing scored gives 100",
			cfg:  cpuMem,
			pod:  Pod{Requests: res("ephemeral-storage", "1Gi")},
			node: Node{Allocatable: res("cpu", "4", "ephemeral-storage", "2Gi")},
			want: NodeScore{FitPlus: 100, Scarce: 100, Total: 200},
		},
		{
			name: "explicit zero request is not requested",
			cfg:  cpuMem,
			pod:  Pod{Requests: res("cpu", "0", "memory", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "4"), Requested: res("cpu", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "container without a cpu key is charged 100m: (4000-1100)/4000",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1)},
			pod: Pod{Requests: res("cpu", "1", "memory", "1Gi"),
				Containers: []Resources{res("cpu", "1", "memory", "1Gi"), res()}},
			node: Node{Allocatable: res("cpu", "4")},
			want: NodeScore{FitPlus: 72, Scarce: 100, Total: 172},
		},
		{
			name: "container without a memory key is charged 200Mi: (1Gi-1Gi/2-200Mi)/1Gi",
			cfg:  Config{FitPlus: fit("memory", LeastAllocated, 1)},
			pod: Pod{Requests: res("memory", "512Mi"),
				Containers: []Resources{res("memory", "512Mi"), res("cpu", "1")}},
			node: Node{Allocatable: res("memory", "1Gi")},
			want: NodeScore{FitPlus: 30, Scarce: 100, Total: 130},
		},
		{
			name: "container with an explicit zero is charged 0",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1)},
			pod: Pod{Requests: res("cpu", "1"),
				Containers: []Resources{res("cpu", "1"), res("cpu", "0")}},
			node: Node{Allocatable: res("cpu", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "pod without a cpu request is not charged the cpu default",
			cfg:  cpuMem,
			pod:  Pod{Requests: res("memory", "1"), Containers: []Resources{res("memory", "1")}},
			node: Node{Allocatable: res("cpu", "100m", "memory", "4")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "untracked names are ignored in config, requests and allocatable",
			cfg: Config{FitPlus: fit("gpu", MostAllocated, 5, "pods", MostAllocated, 5, "cpu", LeastAllocated, 1),
				Scarce: names("gpu", "pods")},
			pod:  Pod{Requests: res("cpu", "1", "gpu", "1", "pods", "1")},
			node: Node{Allocatable: res("cpu", "2", "gpu", "4", "pods", "110")},
			want: NodeScore{FitPlus: 50, Scarce: 100, Total: 150},
		},
		{
			name: "plugin weights multiply",
			cfg:  gpuConfig(2, 3),
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4", "nvidia.com/gpu", "1")},
			want: NodeScore{FitPlus: 75, Scarce: 0, Total: 150},
		},
		{
			name: "plugin weight 0 and absent count as 1",
			cfg:  Config{FitPlus: fit("cpu", LeastAllocated, 1), Scarce: names("nvidia.com/gpu"), PluginWeights: map[string]int64{PluginFitPlus: 0}},
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4", "nvidia.com/gpu", "1", "memory", "1Gi")},
			want: NodeScore{FitPlus: 75, Scarce: 50, Total: 125},
		},
		{
			name: "scarce: pod requesting the scarce resource is not penalised",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{Requests: res("nvidia.com/gpu", "1")},
			node: Node{Allocatable: res("nvidia.com/gpu", "8", "cpu", "8")},
			want: NodeScore{FitPlus: 12, Scarce: 100, Total: 112},
		},
		{
			name: "scarce: pod requesting nothing sees every node type: 3 unrequested, 1 scarce",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{},
			node: Node{Allocatable: res("nvidia.com/gpu", "8", "cpu", "8", "memory", "8Gi")},
			want: NodeScore{FitPlus: 100, Scarce: 66, Total: 166},
		},
		{
			name: "scarce: allocatable 0 does not count",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("nvidia.com/gpu", "0", "cpu", "4", "memory", "1Gi")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
		{
			name: "scarce: dilution by unrelated types, 1 of 5 unrequested is scarce",
			cfg:  gpuConfig(1, 1),
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "1Gi", "ephemeral-storage", "1Gi", "nvidia.com/gpu", "1",
				"hugepages-2Mi", "1Gi", "example.com/nic", "1")},
			want: NodeScore{FitPlus: 75, Scarce: 80, Total: 155},
		},
		{
			name: "scarce: duplicates in the list count once",
			cfg:  Config{Scarce: names("nvidia.com/gpu", "nvidia.com/gpu")},
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "4", "memory", "1Gi", "nvidia.com/gpu", "1")},
			want: NodeScore{FitPlus: 100, Scarce: 50, Total: 150},
		},
		{
			name: "scarce: empty list is 100 everywhere",
			cfg:  Config{},
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("nvidia.com/gpu", "1")},
			want: NodeScore{FitPlus: 100, Scarce: 100, Total: 200},
		},
		{
			name: "exbibyte amounts do not overflow",
			cfg:  Config{FitPlus: fit("memory", MostAllocated, 1)},
			pod:  Pod{Requests: res("memory", "1Ei")},
			node: Node{Allocatable: res("memory", "4Ei"), Requested: res("memory", "2Ei")},
			want: NodeScore{FitPlus: 75, Scarce: 100, Total: 175},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.cfg)
			tc.node.Name = "n"
			tc.want.Node = "n"
			if d := cmp.Diff(tc.want, s.Score(&tc.pod, &tc.node)); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestRankOrdersByTotalThenNameBytes(t *testing.T) {
	s := mustNew(t, Config{FitPlus: fit("cpu", LeastAllocated, 1)})
	nodes := []Node{
		{Name: "node-b", Allocatable: res("cpu", "4")},
		{Name: "node-a", Allocatable: res("cpu", "4")},
		{Name: "Node-z", Allocatable: res("cpu", "4")},
		{Name: "big", Allocatable: res("cpu", "8")},
	}
	pod := Pod{Requests: res("cpu", "1")}
	got := s.Rank(&pod, nodes)
	want := []NodeScore{
		{Node: "big", FitPlus: 87, Scarce: 100, Total: 187},
		{Node: "Node-z", FitPlus: 75, Scarce: 100, Total: 175},
		{Node: "node-a", FitPlus: 75, Scarce: 100, Total: 175},
		{Node: "node-b", FitPlus: 75, Scarce: 100, Total: 175},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestRankDoesNotModifyItsInputs(t *testing.T) {
	s := mustNew(t, gpuConfig(2, 2))
	pod := Pod{Requests: res("cpu", "1"), Containers: []Resources{res("memory", "1")}}
	nodes := []Node{{Name: "a", Allocatable: res("cpu", "4", "nvidia.com/gpu", "1"), Requested: res("cpu", "1")}}
	podBefore, nodesBefore := clonePod(pod), cloneNodes(nodes)
	s.Rank(&pod, nodes)
	s.Place(&pod, 3, nodes)
	if d := cmp.Diff(podBefore, pod); d != "" {
		t.Errorf("pod modified (-before,+after):\n%s", d)
	}
	if d := cmp.Diff(nodesBefore, nodes); d != "" {
		t.Errorf("nodes modified (-before,+after):\n%s", d)
	}
}

func clonePod(p Pod) Pod {
	c := p
	c.Requests = cloneRes(p.Requests)
	c.Containers = nil
	for _, ct := range p.Containers {
		c.Containers = append(c.Containers, cloneRes(ct))
	}
	return c
}

func cloneNodes(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = n
		out[i].Allocatable = cloneRes(n.Allocatable)
		out[i].Requested = cloneRes(n.Requested)
	}
	return out
}

func cloneRes(r Resources) Resources {
	c := Resources{}
	for k, v := range r {
		c[k] = v
	}
	return c
}
