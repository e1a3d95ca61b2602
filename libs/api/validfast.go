package api

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// The fast accept of Validate.
//
// Most objects validated are valid Workloads. workloadValid answers, for
// one, whether validateMeta and validateWorkload would find nothing, without
// building a field.Path, a map or a sorted key list: the same checks as
// booleans, with DNS names matched by hand instead of by regexp. It may
// only be stricter than the full validation, never looser: when it answers
// false, Validate runs the full validation, which names every error with
// its path exactly as before. TestWorkloadValidAgrees checks it against the
// full validation.

// workloadValid reports whether Validate finds nothing wrong with wl.
func workloadValid(wl *Workload) bool {
	return objectMetaValid(&wl.ObjectMeta) && workloadSpecValid(&wl.Spec)
}

// objectMetaValid is validateMeta(m, true, true) finding nothing, for
// metadata without generateName.
func objectMetaValid(m *metav1.ObjectMeta) bool {
	if m.GenerateName != "" || !isDNS1123Subdomain(m.Name) || !isDNS1123Label(m.Namespace) {
		return false
	}
	for k, v := range m.Labels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return false
		}
	}
	for k := range m.Annotations {
		if len(validation.IsQualifiedName(strings.ToLower(k))) > 0 {
			return false
		}
	}
	if _, _, err := ExpectedRuntime(m.Annotations); err != nil {
		return false
	}
	return apivalidation.ValidateAnnotationsSize(m.Annotations) == nil
}

// workloadSpecValid is validateWorkload finding nothing.
func workloadSpecValid(s *WorkloadSpec) bool {
	if len(s.PodSets) == 0 || len(s.PodSets) > MaxPodSets {
		return false
	}
	withMinCount := 0
	for i := range s.PodSets {
		ps := &s.PodSets[i]
		if !isDNS1123Label(ps.Name) {
			return false
		}
		for j := range i {
			if s.PodSets[j].Name == ps.Name {
				return false
			}
		}
		if ps.Count < 1 || ps.Count > MaxPodSetCount {
			return false
		}
		if ps.MinCount != nil {
			withMinCount++
			if m := *ps.MinCount; m < 0 || m > ps.Count {
				return false
			}
		}
		if ps.Template.Spec.Containers == nil || !podSpecValid(&ps.Template.Spec) {
			return false
		}
	}
	if withMinCount > 1 || !totalsFit(s.PodSets) {
		return false
	}
	if s.PriorityClassName != "" && (!isDNS1123Subdomain(s.PriorityClassName) || s.Priority == nil) {
		return false
	}
	switch s.PriorityClassSource {
	case "", WorkloadPriorityClassSrc, PodPriorityClassSrc:
	default:
		return false
	}
	return s.QueueName == "" || isDNS1123Subdomain(s.QueueName)
}

// podSpecValid is validatePodSpec finding nothing.
func podSpecValid(spec *corev1.PodSpec) bool {
	for _, cs := range [2][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			if cs[i].Name == "" || !quantitiesValid(r.Requests) || !quantitiesValid(r.Limits) {
				return false
			}
			if _, ok := r.Requests[ResourcePods]; ok {
				return false
			}
		}
	}
	return quantitiesValid(spec.Overhead)
}

// quantitiesValid is quantity finding nothing for every entry of l.
func quantitiesValid(l corev1.ResourceList) bool {
	for name, q := range l {
		if q.Sign() < 0 {
			return false
		}
		if _, exact := quota.ValueExact(name, q); !exact {
			return false
		}
	}
	return true
}

// totalsFit is validateTotals finding nothing. All the amounts summed are
// positive, so whether a sum overflows does not depend on the order.
func totalsFit(podSets []PodSet) bool {
	var t podSetTotals
	for i := range podSets {
		ps := &podSets[i]
		spec := &ps.Template.Spec
		count := int64(ps.Count)
		if len(spec.Containers) == 1 && len(spec.InitContainers) == 0 && len(spec.Overhead) == 0 {
			// One container: its effective requests (a request, else the
			// limit) are the pod's total, read in place.
			r := &spec.Containers[0].Resources
			for name, q := range r.Requests {
				if !t.add(name, q, count) {
					return false
				}
			}
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok && !t.add(name, q, count) {
					return false
				}
			}
			continue
		}
		perPod, over := podTotal(spec)
		if over != "" {
			return false
		}
		for name, v := range perPod {
			if !t.addValue(name, v, count) {
				return false
			}
		}
	}
	return true
}

// podSetTotals sums per resource over podSets, in place: a workload names
// a handful of resources; one that names more is left to the full
// validation.
type podSetTotals struct {
	names [8]corev1.ResourceName
	sums  [8]int64
	n     int
}

// add adds count × q, as podTotal converts it, and reports whether every
// step fits int64.
func (t *podSetTotals) add(name corev1.ResourceName, q resource.Quantity, count int64) bool {
	if name == ResourcePods {
		return true
	}
	v, ok := quota.ValueExact(name, q)
	if !ok {
		return false
	}
	if v <= 0 {
		return true // podTotal leaves it out
	}
	return t.addValue(name, v, count)
}

func (t *podSetTotals) addValue(name corev1.ResourceName, v, count int64) bool {
	v, ok := quota.MulInt(v, count)
	if !ok {
		return false
	}
	for i := range t.n {
		if t.names[i] == name {
			t.sums[i], ok = quota.AddInt(t.sums[i], v)
			return ok
		}
	}
	if t.n == len(t.names) {
		return false
	}
	t.names[t.n], t.sums[t.n] = name, v
	t.n++
	return true
}

// isDNS1123Label reports whether validation.IsDNS1123Label finds nothing:
// at most 63 characters of [-a-z0-9], starting and ending with [a-z0-9].
func isDNS1123Label(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isDNS1123Subdomain reports whether validation.IsDNS1123Subdomain finds
// nothing: at most 253 characters, labels as isDNS1123Label's (without
// their length bound) joined by dots.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			case c == '-' && i > start && i+1 < len(s) && s[i+1] != '.':
			default:
				return false
			}
			continue
		}
		if i == start {
			return false // an empty label
		}
		start = i + 1
	}
	return true
}
