package scoring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestFilter(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name string
		pod  Pod
		node Node
		want FilterResult
	}{
		{
			name: "fits exactly",
			pod:  Pod{Requests: res("cpu", "1", "memory", "1Gi")},
			node: Node{Allocatable: res("cpu", "2", "memory", "2Gi"), Requested: res("cpu", "1", "memory", "1Gi")},
		},
		{
			name: "node carrying all flavor labels passes",
			pod:  Pod{NodeSelector: map[string]string{"zone": "a", "pool": "gpu"}},
			node: Node{Labels: map[string]string{"zone": "a", "pool": "gpu", "extra": "x"}},
		},
		{
			name: "missing label fails, first key by name",
			pod:  Pod{NodeSelector: map[string]string{"zone": "a", "pool": "gpu"}},
			node: Node{Labels: map[string]string{"other": "x"}},
			want: FilterResult{Reason: NodeLabelsMismatch, Label: "pool"},
		},
		{
			name: "label with another value fails",
			pod:  Pod{NodeSelector: map[string]string{"zone": "a"}},
			node: Node{Labels: map[string]string{"zone": "b"}},
			want: FilterResult{Reason: NodeLabelsMismatch, Label: "zone"},
		},
		{
			name: "untolerated NoSchedule taint fails",
			node: Node{Taints: []corev1.Taint{gpuTaint}},
			want: FilterResult{Reason: UntoleratedTaint, Taint: gpuTaint},
		},
		{
			name: "untolerated NoExecute taint fails",
			node: Node{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}},
			want: FilterResult{Reason: UntoleratedTaint, Taint: corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoExecute}},
		},
		{
			name: "PreferNoSchedule taint is ignored",
			node: Node{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}},
		},
		{
			name: "tolerated taint passes",
			pod:  Pod{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}},
			node: Node{Taints: []corev1.Taint{gpuTaint}},
		},
		{
			name: "insufficient resource reports the resource and the shortfall",
			pod:  Pod{Requests: res("cpu", "1500m", "memory", "1Gi")},
			node: Node{Allocatable: res("cpu", "2", "memory", "2Gi"), Requested: res("cpu", "1")},
			want: FilterResult{Reason: InsufficientResource, Resource: "cpu", Shortfall: 500},
		},
		{
			name: "resource the node lacks is insufficient",
			pod:  Pod{Requests: res("cpu", "1", "nvidia.com/gpu", "1")},
			node: Node{Allocatable: res("cpu", "2")},
			want: FilterResult{Reason: InsufficientResource, Resource: "nvidia.com/gpu", Shortfall: 1},
		},
		{
			name: "over-committed node: the shortfall includes the overcommit",
			pod:  Pod{Requests: res("cpu", "1")},
			node: Node{Allocatable: res("cpu", "2"), Requested: res("cpu", "3")},
			want: FilterResult{Reason: InsufficientResource, Resource: "cpu", Shortfall: 2000},
		},
		{
			name: "zero and untracked requests are not checked",
			pod:  Pod{Requests: Resources{"cpu": 0, "gpu": 4}},
			node: Node{Allocatable: res("memory", "1")},
		},
		{
			name: "labels are checked before taints and resources",
			pod:  Pod{NodeSelector: map[string]string{"zone": "a"}, Requests: res("cpu", "9")},
			node: Node{Taints: []corev1.Taint{gpuTaint}},
			want: FilterResult{Reason: NodeLabelsMismatch, Label: "zone"},
		},
		{
			name: "taints are checked before resources",
			pod:  Pod{Requests: res("cpu", "9")},
			node: Node{Taints: []corev1.Taint{gpuTaint}},
			want: FilterResult{Reason: UntoleratedTaint, Taint: gpuTaint},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Filter(&tc.pod, &tc.node)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if got.Passed() != (tc.want.Reason == "") {
				t.Errorf("Passed() = %v for %v", got.Passed(), got)
			}
		})
	}
}

func TestWithFlavorAddsLabelsAndTolerationsWithoutAliasing(t *testing.T) {
	tol := []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
	pod := Pod{NodeSelector: map[string]string{"x": "1"}, Tolerations: tol[:1:1]}
	got := pod.WithFlavor(map[string]string{"zone": "a"}, []corev1.Toleration{{Key: "b", Operator: corev1.TolerationOpExists}})
	want := Pod{
		NodeSelector: map[string]string{"x": "1", "zone": "a"},
		Tolerations:  []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}, {Key: "b", Operator: corev1.TolerationOpExists}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
	if len(pod.NodeSelector) != 1 || len(pod.Tolerations) != 1 {
		t.Errorf("original pod modified: %+v", pod)
	}
}

func TestFilterResultString(t *testing.T) {
	for _, tc := range []struct {
		r    FilterResult
		want string
	}{
		{FilterResult{}, "fits"},
		{FilterResult{Reason: NodeLabelsMismatch, Label: "zone"}, "NodeLabelsMismatch: label zone"},
		{FilterResult{Reason: UntoleratedTaint, Taint: corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}, "UntoleratedTaint: k=v:NoSchedule"},
		{FilterResult{Reason: InsufficientResource, Resource: "cpu", Shortfall: 500}, "InsufficientResource: cpu short by 500"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
