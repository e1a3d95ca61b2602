package api

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// PodRequests returns the per-pod request of a pod spec as Kueue computes it
// (pkg/workload AdjustResources + pkg/util/limitrange TotalRequests, v0.6.3):
//
//   - a container's missing request takes its limit;
//   - per resource, max(largest init-container request, sum of containers) +
//     spec.overhead, with v0.6.3's sidecar rule: restartable init containers
//     (restartPolicy Always) are added to the containers' sum and to every
//     later init container's request;
//   - cpu in milli-units, every other resource Quantity.Value() (fractions
//     round up), after summing, so two 0.5 GPUs count as 1, not 2; a total
//     beyond int64 saturates rather than wrapping (see ResourceValue).
//
// Not modelled: LimitRange defaults and RuntimeClass overheads (jetqueue has
// neither object). No "pods" entry is returned (the scheduler adds
// pods=count itself); zero and negative totals are omitted.
func PodRequests(spec *corev1.PodSpec) map[corev1.ResourceName]int64 {
	if spec != nil && len(spec.Containers) == 1 && len(spec.InitContainers) == 0 && len(spec.Overhead) == 0 {
		// The common pod, one container: its effective requests are the
		// total, read in place. A restore derives this for every workload
		// it holds, and the general sum allocates a list per step.
		return oneContainerRequests(&spec.Containers[0].Resources)
	}
	return summedRequests(spec)
}

// oneContainerRequests is PodRequests of a pod of one container and no
// overhead.
func oneContainerRequests(r *corev1.ResourceRequirements) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(r.Requests)+len(r.Limits))
	// A request wins over the limit of the same resource.
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok && name != ResourcePods {
			if v := ResourceValue(name, q); v > 0 {
				out[name] = v
			}
		}
	}
	for name, q := range r.Requests {
		if name == ResourcePods {
			continue
		}
		if v := ResourceValue(name, q); v > 0 {
			out[name] = v
		}
	}
	return out
}

// summedRequests is PodRequests of any pod.
func summedRequests(spec *corev1.PodSpec) map[corev1.ResourceName]int64 {
	total := podResourceList(spec)
	out := make(map[corev1.ResourceName]int64, len(total))
	for name, q := range total {
		if name == ResourcePods {
			continue
		}
		if v := ResourceValue(name, q); v > 0 {
			out[name] = v
		}
	}
	return out
}

// podResourceList is the per-pod total of PodRequests as exact quantities,
// before the conversion to integer units.
func podResourceList(spec *corev1.PodSpec) corev1.ResourceList {
	if spec == nil {
		return corev1.ResourceList{}
	}
	main := corev1.ResourceList{}
	for i := range spec.Containers {
		addTo(main, effectiveRequests(&spec.Containers[i]))
	}
	maxInit := corev1.ResourceList{}
	sidecars := corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		req := effectiveRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addTo(sidecars, req)
			continue
		}
		use := corev1.ResourceList{}
		addTo(use, req)
		addTo(use, sidecars)
		for name, q := range use {
			if cur, ok := maxInit[name]; !ok || q.Cmp(cur) > 0 {
				maxInit[name] = q
			}
		}
	}
	total := corev1.ResourceList{}
	addTo(total, main)
	addTo(total, sidecars)
	for name, q := range maxInit {
		if cur, ok := total[name]; !ok || q.Cmp(cur) > 0 {
			total[name] = q
		}
	}
	addTo(total, spec.Overhead)
	return total
}

// ResourceValue converts a quantity to Kueue's integer unit for the resource:
// milli-units for cpu, Value() (rounded up) otherwise. An amount beyond int64
// saturates (quota.Value), so it exceeds every quota instead of wrapping or
// reading as 0; Validate refuses such amounts at the door.
func ResourceValue(name corev1.ResourceName, q resource.Quantity) int64 {
	return quota.Value(name, q)
}

func effectiveRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	return out
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name].DeepCopy()
		cur.Add(q)
		dst[name] = cur
	}
}

// RequestsExceedLimits reports the first container (init containers first, as
// Kueue's scheduler checks them) whose explicit request of some resource is
// larger than its limit; Kueue leaves such a workload pending for ever with
// "resource validation failed". field is relative to the pod spec, e.g.
// "containers[1]"; msg lists the resources in name order, e.g.
// "requests exceed limits for cpu, memory". bad is false when all is well.
func RequestsExceedLimits(spec *corev1.PodSpec) (field, msg string, bad bool) {
	if spec == nil {
		return "", "", false
	}
	for _, group := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range group.cs {
			r := &group.cs[i].Resources
			var over []string
			for name, req := range r.Requests {
				if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
					over = append(over, string(name))
				}
			}
			if len(over) > 0 {
				sort.Strings(over)
				return fmt.Sprintf("%s[%d]", group.name, i), "requests exceed limits for " + strings.Join(over, ", "), true
			}
		}
	}
	return "", "", false
}
