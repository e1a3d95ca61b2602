package api

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestDNSNamesAsTheRegexps: the hand-written name checks accept exactly
// what Kubernetes' validation accepts, on every string of up to 5
// characters over an alphabet that reaches each rule, and at the length
// bounds.
func TestDNSNamesAsTheRegexps(t *testing.T) {
	const alphabet = "a0-.A_"
	var all []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		all = append(all, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+string(c), n-1)
		}
	}
	grow("", 5)
	for _, n := range []int{62, 63, 64, 252, 253, 254} {
		all = append(all, strings.Repeat("a", n), "a"+strings.Repeat("-", n-2)+"b", strings.Repeat("a.", n/2)+"b"[:n%2])
	}
	for _, s := range all {
		if got, want := isDNS1123Label(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Errorf("isDNS1123Label(%q) = %v, want %v", s, got, want)
		}
		if got, want := isDNS1123Subdomain(s), len(validation.IsDNS1123Subdomain(s)) == 0; got != want {
			t.Errorf("isDNS1123Subdomain(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestWorkloadValidAgrees: the fast accept accepts a Workload exactly when
// the full validation finds nothing (but for generateName and more than 8
// resources, which it leaves to the full validation), over a valid Workload
// and one variant per rule.
func TestWorkloadValidAgrees(t *testing.T) {
	q := resource.MustParse
	container := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	podSet := func(name string, count int32, cs ...corev1.Container) PodSet {
		return PodSet{Name: name, Count: count, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs}}}
	}
	base := func() *Workload {
		return &Workload{
			TypeMeta:   metav1.TypeMeta{APIVersion: KueueAPIVersion, Kind: KindWorkload},
			ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ns-1"},
			Spec: WorkloadSpec{QueueName: "lq", Priority: ptr[int32](50), PodSets: []PodSet{
				podSet("main", 1, container("c", corev1.ResourceList{"cpu": q("3"), "memory": q("6Gi")}, nil)),
			}},
		}
	}
	variants := map[string]func(w *Workload){
		"as is":                 func(w *Workload) {},
		"no name":               func(w *Workload) { w.Name = "" },
		"name with capitals":    func(w *Workload) { w.Name = "W" },
		"dotted name":           func(w *Workload) { w.Name = "a.b" },
		"name too long":         func(w *Workload) { w.Name = strings.Repeat("a", 254) },
		"generateName":          func(w *Workload) { w.GenerateName = "w-" },
		"generateName only":     func(w *Workload) { w.Name, w.GenerateName = "", "w-" },
		"no namespace":          func(w *Workload) { w.Namespace = "" },
		"dotted namespace":      func(w *Workload) { w.Namespace = "a.b" },
		"labels":                func(w *Workload) { w.Labels = map[string]string{"a": "b", "x.io/y": ""} },
		"bad label key":         func(w *Workload) { w.Labels = map[string]string{"bad key": "b"} },
		"bad label value":       func(w *Workload) { w.Labels = map[string]string{"a": "bad value"} },
		"annotations":           func(w *Workload) { w.Annotations = map[string]string{"A.io/B": "any thing"} },
		"bad annotation key":    func(w *Workload) { w.Annotations = map[string]string{"bad key": ""} },
		"expected runtime":      func(w *Workload) { w.Annotations = map[string]string{ExpectedRuntimeAnnot: "90m"} },
		"bad expected runtime":  func(w *Workload) { w.Annotations = map[string]string{ExpectedRuntimeAnnot: "soon"} },
		"annotations too large": func(w *Workload) { w.Annotations = map[string]string{"a": strings.Repeat("x", 300000)} },
		"no podSets":            func(w *Workload) { w.Spec.PodSets = nil },
		"too many podSets":      func(w *Workload) { w.Spec.PodSets = manyPodSets(MaxPodSets + 1) },
		"most podSets":          func(w *Workload) { w.Spec.PodSets = manyPodSets(MaxPodSets) },
		"duplicate podSet":      func(w *Workload) { w.Spec.PodSets = append(w.Spec.PodSets, w.Spec.PodSets[0]) },
		"unnamed podSet":        func(w *Workload) { w.Spec.PodSets[0].Name = "" },
		"dotted podSet":         func(w *Workload) { w.Spec.PodSets[0].Name = "a.b" },
		"count 0":               func(w *Workload) { w.Spec.PodSets[0].Count = 0 },
		"largest count":         func(w *Workload) { w.Spec.PodSets[0].Count = MaxPodSetCount },
		"count over":            func(w *Workload) { w.Spec.PodSets[0].Count = MaxPodSetCount + 1 },
		"minCount":              func(w *Workload) { w.Spec.PodSets[0].MinCount = ptr[int32](1) },
		"negative minCount":     func(w *Workload) { w.Spec.PodSets[0].MinCount = ptr[int32](-1) },
		"minCount over count":   func(w *Workload) { w.Spec.PodSets[0].MinCount = ptr[int32](2) },
		"two minCounts": func(w *Workload) {
			twoPodSets(w)
			w.Spec.PodSets[0].MinCount, w.Spec.PodSets[1].MinCount = ptr[int32](1), ptr[int32](1)
		},
		"no containers":     func(w *Workload) { w.Spec.PodSets[0].Template.Spec.Containers = nil },
		"empty containers":  func(w *Workload) { w.Spec.PodSets[0].Template.Spec.Containers = []corev1.Container{} },
		"unnamed container": func(w *Workload) { w.Spec.PodSets[0].Template.Spec.Containers[0].Name = "" },
		"pods requested":    func(w *Workload) { req(w)["pods"] = q("1") },
		"pods limit":        func(w *Workload) { lim(w)["pods"] = q("1") },
		"negative cpu":      func(w *Workload) { req(w)["cpu"] = q("-1") },
		"milli cpu":         func(w *Workload) { req(w)["cpu"] = q("500m") },
		"micro cpu":         func(w *Workload) { req(w)["cpu"] = q("1u") },
		"zero memory":       func(w *Workload) { req(w)["memory"] = q("0") },
		"cpu too large":     func(w *Workload) { req(w)["cpu"] = q("9223372036854776") },
		"largest cpu":       func(w *Workload) { req(w)["cpu"] = q("9223372036854775") },
		"memory too large":  func(w *Workload) { req(w)["memory"] = q("1e19") },
		"limit only":        func(w *Workload) { lim(w)["example.com/gpu"] = q("2") },
		"8 resources": func(w *Workload) {
			for i := range 6 {
				req(w)[corev1.ResourceName("example.com/r"+string(rune('a'+i)))] = q("1")
			}
		},
		"9 resources": func(w *Workload) {
			for i := range 7 {
				req(w)[corev1.ResourceName("example.com/r"+string(rune('a'+i)))] = q("1")
			}
		},
		"limit too large":          func(w *Workload) { lim(w)["example.com/gpu"] = q("1e30") },
		"negative limit":           func(w *Workload) { lim(w)["cpu"] = q("-2") },
		"count × request overflow": func(w *Workload) { req(w)["memory"] = q("8Ei"); w.Spec.PodSets[0].Count = 2 },
		"sum over podSets overflow": func(w *Workload) {
			twoPodSets(w)
			for i := range w.Spec.PodSets {
				w.Spec.PodSets[i].Template.Spec.Containers[0].Resources.Requests["memory"] = q("5Ei")
			}
		},
		"two containers overflow": func(w *Workload) {
			c := w.Spec.PodSets[0].Template.Spec.Containers[0]
			c.Name = "d"
			c.Resources.Requests = corev1.ResourceList{"memory": q("5Ei")}
			req(w)["memory"] = q("5Ei")
			w.Spec.PodSets[0].Template.Spec.Containers = append(w.Spec.PodSets[0].Template.Spec.Containers, c)
		},
		"init container": func(w *Workload) {
			w.Spec.PodSets[0].Template.Spec.InitContainers = []corev1.Container{container("i", corev1.ResourceList{"cpu": q("8")}, nil)}
		},
		"unnamed init container": func(w *Workload) {
			w.Spec.PodSets[0].Template.Spec.InitContainers = []corev1.Container{container("", nil, nil)}
		},
		"overhead":               func(w *Workload) { w.Spec.PodSets[0].Template.Spec.Overhead = corev1.ResourceList{"cpu": q("100m")} },
		"negative overhead":      func(w *Workload) { w.Spec.PodSets[0].Template.Spec.Overhead = corev1.ResourceList{"cpu": q("-1")} },
		"priorityClassName":      func(w *Workload) { w.Spec.PriorityClassName = "high" },
		"priorityClassName only": func(w *Workload) { w.Spec.PriorityClassName, w.Spec.Priority = "high", nil },
		"bad priorityClassName":  func(w *Workload) { w.Spec.PriorityClassName = "High" },
		"workload class source":  func(w *Workload) { w.Spec.PriorityClassSource = WorkloadPriorityClassSrc },
		"pod class source":       func(w *Workload) { w.Spec.PriorityClassSource = PodPriorityClassSrc },
		"bad class source":       func(w *Workload) { w.Spec.PriorityClassSource = "x" },
		"no queueName":           func(w *Workload) { w.Spec.QueueName = "" },
		"bad queueName":          func(w *Workload) { w.Spec.QueueName = "-lq" },
	}
	accepted := 0
	for name, change := range variants {
		w := base()
		change(w)
		fast, full := workloadValid(w), validateFull(w)
		switch {
		case fast && full != nil:
			t.Errorf("%s: the fast accept accepts what the full validation refuses: %v", name, full)
		case !fast && full == nil && w.GenerateName == "" && name != "9 resources":
			t.Errorf("%s: the fast accept refuses a valid Workload", name)
		case fast:
			accepted++
		}
		if got := Validate(w); (got == nil) != (full == nil) || (got != nil && got.Error() != full.Error()) {
			t.Errorf("%s: Validate = %v, the full validation %v", name, got, full)
		}
	}
	if accepted < 20 {
		t.Errorf("the fast accept took %d variants; the test no longer exercises it", accepted)
	}
}

func req(w *Workload) corev1.ResourceList {
	return w.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests
}

func lim(w *Workload) corev1.ResourceList {
	r := &w.Spec.PodSets[0].Template.Spec.Containers[0].Resources
	if r.Limits == nil {
		r.Limits = corev1.ResourceList{}
	}
	return r.Limits
}

func twoPodSets(w *Workload) {
	first := w.Spec.PodSets[0]
	second := PodSet{Name: "second", Count: first.Count, Template: *first.Template.DeepCopy()}
	w.Spec.PodSets = append(w.Spec.PodSets, second)
}

func manyPodSets(n int) []PodSet {
	out := make([]PodSet, n)
	for i := range out {
		out[i] = PodSet{Name: "p" + string(rune('a'+i)), Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}}}},
		}}}
	}
	return out
}
