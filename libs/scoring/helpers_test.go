package scoring

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// res builds Resources from name/quantity pairs through NewResources, so
// tests exercise the same unit conversion as callers.
func res(kv ...string) Resources {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return NewResources(l)
}

func fit(kv ...any) map[corev1.ResourceName]ResourcesType {
	m := map[corev1.ResourceName]ResourcesType{}
	for i := 0; i < len(kv); i += 3 {
		m[corev1.ResourceName(kv[i].(string))] = ResourcesType{Type: kv[i+1].(Strategy), Weight: int64(kv[i+2].(int))}
	}
	return m
}

func names(n ...string) []corev1.ResourceName {
	out := make([]corev1.ResourceName, len(n))
	for i, s := range n {
		out[i] = corev1.ResourceName(s)
	}
	return out
}

func mustNew(t interface{ Fatal(...any) }, cfg Config) *Scorer {
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gpuConfig is the documented Koordinator profile: GPU binpacked, cpu and
// memory spread, the GPU scarce.
func gpuConfig(wFit, wScarce int64) Config {
	return Config{
		FitPlus:       fit("nvidia.com/gpu", MostAllocated, 2, "cpu", LeastAllocated, 1, "memory", LeastAllocated, 1),
		Scarce:        names("nvidia.com/gpu"),
		PluginWeights: map[string]int64{PluginFitPlus: wFit, PluginScarce: wScarce},
	}
}
