package scoring

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// benchNodes builds a deterministic cluster: every fourth node has 8 GPUs,
// and usage varies so that ranking does real comparisons.
func benchNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		alloc := Resources{"cpu": 64000, "memory": 256 << 30, "ephemeral-storage": 500 << 30, "hugepages-2Mi": 0}
		used := Resources{"cpu": int64(i%61) * 1000, "memory": int64(i%37) << 30}
		if i%4 == 0 {
			alloc["nvidia.com/gpu"] = 8
			used["nvidia.com/gpu"] = int64(i % 7)
		}
		nodes[i] = Node{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{"pool": "default"}, Allocatable: alloc, Requested: used}
		if i%10 == 0 {
			nodes[i].Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	return nodes
}

var benchPod = Pod{
	Requests:     Resources{"cpu": 4000, "memory": 16 << 30, "nvidia.com/gpu": 1},
	Containers:   []Resources{{"cpu": 4000, "memory": 16 << 30, "nvidia.com/gpu": 1}},
	NodeSelector: map[string]string{"pool": "default"},
}

func BenchmarkRank10kNodes(b *testing.B) {
	s, nodes := mustNew(b, gpuConfig(2, 2)), benchNodes(10_000)
	b.ReportAllocs()
	for b.Loop() {
		s.Rank(&benchPod, nodes)
	}
}

func BenchmarkPlace64On10kNodes(b *testing.B) {
	s, nodes := mustNew(b, gpuConfig(2, 2)), benchNodes(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if p := s.Place(&benchPod, 64, nodes); p[63].Node == "" {
			b.Fatalf("pod 64 not placed: %v", p[63].Unschedulable)
		}
	}
}
