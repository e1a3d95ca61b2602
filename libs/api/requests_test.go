package api

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want map[corev1.ResourceName]int64
	}{
		{"cpu in milli-units, memory in bytes",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1500m", "memory", "1Gi"), nil)}},
			map[corev1.ResourceName]int64{"cpu": 1500, "memory": 1 << 30}},
		{"containers are summed",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"), nil), container(rl("cpu", "250m"), nil)}},
			map[corev1.ResourceName]int64{"cpu": 1250}},
		{"a missing request takes the limit, an explicit one is kept",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"), rl("cpu", "2", "memory", "2Gi"))}},
			map[corev1.ResourceName]int64{"cpu": 1000, "memory": 2 << 30}},
		{"the largest init container wins when bigger than the containers",
			corev1.PodSpec{
				InitContainers: []corev1.Container{container(rl("cpu", "3"), nil), container(rl("cpu", "1", "memory", "4Gi"), nil)},
				Containers:     []corev1.Container{container(rl("cpu", "2", "memory", "1Gi"), nil)},
			},
			map[corev1.ResourceName]int64{"cpu": 3000, "memory": 4 << 30}},
		{"init containers are not summed",
			corev1.PodSpec{
				InitContainers: []corev1.Container{container(rl("cpu", "1"), nil), container(rl("cpu", "1"), nil)},
				Containers:     []corev1.Container{container(rl("cpu", "1500m"), nil)},
			},
			map[corev1.ResourceName]int64{"cpu": 1500}},
		{"init container limits count as requests",
			corev1.PodSpec{
				InitContainers: []corev1.Container{container(nil, rl("cpu", "4"))},
				Containers:     []corev1.Container{container(rl("cpu", "1"), nil)},
			},
			map[corev1.ResourceName]int64{"cpu": 4000}},
		{"sidecars run beside the containers and later init containers (v0.6.3)",
			corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
					container(rl("cpu", "3"), nil),
				},
				Containers: []corev1.Container{container(rl("cpu", "2"), nil)},
			},
			map[corev1.ResourceName]int64{"cpu": 4000}},
		{"overhead is added",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1"), nil)}, Overhead: rl("cpu", "100m", "memory", "64Mi")},
			map[corev1.ResourceName]int64{"cpu": 1100, "memory": 64 << 20}},
		{"fractions round up after summing",
			corev1.PodSpec{Containers: []corev1.Container{
				container(rl("nvidia.com/gpu", "0.5", "cpu", "0.0001"), nil),
			}},
			map[corev1.ResourceName]int64{"nvidia.com/gpu": 1, "cpu": 1}},
		{"two halves make one",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("nvidia.com/gpu", "0.5"), nil), container(rl("nvidia.com/gpu", "0.5"), nil)}},
			map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}},
		{"zero requests and pods are omitted",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "0", "memory", "1", "pods", "1"), nil)}},
			map[corev1.ResourceName]int64{"memory": 1}},
		{"nothing requested", corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, map[corev1.ResourceName]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodRequests(&tc.spec)); diff != "" {
				t.Errorf("PodRequests (-want +got):\n%s", diff)
			}
		})
	}
	if got := PodRequests(nil); len(got) != 0 {
		t.Errorf("PodRequests(nil) = %v", got)
	}
}

func TestRequestsExceedLimits(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{"cpu": q(cpu), "memory": q(mem)}
	}
	type result struct {
		Field, Msg string
		Bad        bool
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want result
	}{
		{"requests within limits", corev1.PodSpec{Containers: []corev1.Container{container(rl("1", "1Gi"), rl("1", "2Gi"))}}, result{}},
		{"limit without request", corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("1", "1Gi"))}}, result{}},
		{"request without limit", corev1.PodSpec{Containers: []corev1.Container{container(rl("8", "1Gi"), nil)}}, result{}},
		{"second container over its limits",
			corev1.PodSpec{Containers: []corev1.Container{container(rl("1", "1Gi"), nil), container(rl("2", "2Gi"), rl("1", "1Gi"))}},
			result{"containers[1]", "requests exceed limits for cpu, memory", true}},
		{"init containers are checked first",
			corev1.PodSpec{
				InitContainers: []corev1.Container{container(rl("2", "1Gi"), rl("1", "1Gi"))},
				Containers:     []corev1.Container{container(rl("2", "2Gi"), rl("1", "1Gi"))},
			},
			result{"initContainers[0]", "requests exceed limits for cpu", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, m, bad := RequestsExceedLimits(&tc.spec)
			if diff := cmp.Diff(tc.want, result{f, m, bad}); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// TestOneContainerRequestsIsTheSum: the one-container shortcut of
// PodRequests gives what the general sum gives, over random requests and
// limits (overlapping, zero, negative, huge, "pods").
func TestOneContainerRequestsIsTheSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, ResourcePods, "example.com/gpu"}
	amounts := []string{"0", "1", "-1", "1500m", "1Gi", "0.5", "9223372036854775807", "1e30", "100m"}
	list := func() corev1.ResourceList {
		if rng.IntN(4) == 0 {
			return nil
		}
		l := corev1.ResourceList{}
		for _, n := range names {
			if rng.IntN(2) == 0 {
				l[n] = resource.MustParse(amounts[rng.IntN(len(amounts))])
			}
		}
		return l
	}
	for i := range 5000 {
		spec := corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list(), Limits: list()}}}}
		if d := cmp.Diff(summedRequests(&spec), PodRequests(&spec)); d != "" {
			t.Fatalf("case %d %v: shortcut differs from the sum (-sum +shortcut):\n%s", i, spec.Containers[0].Resources, d)
		}
	}
}
