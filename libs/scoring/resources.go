package scoring

import (
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// The non-zero request defaults kube-scheduler charges a container that
// has no cpu or memory key (pkg/scheduler/util DefaultMilliCPURequest,
// DefaultMemoryRequest).
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Tracked reports whether the plugins see a resource name: cpu, memory,
// ephemeral-storage and kube-scheduler's "scalar" names. Everything else,
// "pods" and bare names such as "gpu" included, is ignored everywhere.
func Tracked(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	s := string(name)
	return strings.Contains(s, "/") ||
		strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}

// Resources is an amount per resource in Kueue's integer units. A missing
// key is 0 except in Pod.Containers, where it means "no key" and triggers
// the cpu/memory defaults.
type Resources map[corev1.ResourceName]int64

// NewResources converts a ResourceList (cpu to millicores, the rest with
// Value, fractions rounded up) and drops names that are not tracked.
func NewResources(l corev1.ResourceList) Resources {
	r := make(Resources, len(l))
	for name, q := range l {
		if Tracked(name) {
			r[name] = quota.Value(name, q)
		}
	}
	return r
}

// Pod is one pod of a podSet as the filter and the scorer see it.
type Pod struct {
	// Requests are the pod's aggregate explicit requests; a resource is
	// requested when its entry is > 0.
	Requests Resources
	// Containers, when non-nil, are the per-container requests; they only
	// decide the cpu/memory defaults of the pod's charge.
	Containers []Resources
	// NodeSelector holds labels a node must carry, such as the nodeLabels
	// of the ResourceFlavor the podSet was assigned (see WithFlavor).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// WithFlavor returns the pod as Kueue releases it on a flavor: the
// flavor's nodeLabels join the node selector and its tolerations the pod's.
// p is not modified.
func (p Pod) WithFlavor(nodeLabels map[string]string, tolerations []corev1.Toleration) Pod {
	sel := maps.Clone(p.NodeSelector)
	if sel == nil {
		sel = make(map[string]string, len(nodeLabels))
	}
	maps.Copy(sel, nodeLabels)
	p.NodeSelector = sel
	p.Tolerations = append(slices.Clip(p.Tolerations), tolerations...)
	return p
}

// Charge is what the pod adds to a node's requested amounts: its requests,
// plus, for cpu and memory, the default for every container without that
// key, matching the non-zero accounting of Node.Requested.
func (p *Pod) Charge() Resources {
	c := make(Resources, len(p.Requests)+2)
	for name, v := range p.Requests {
		if Tracked(name) {
			c[name] = v
		}
	}
	var cpu, mem int64
	for _, ct := range p.Containers {
		if _, ok := ct[corev1.ResourceCPU]; !ok {
			cpu += DefaultMilliCPURequest
		}
		if _, ok := ct[corev1.ResourceMemory]; !ok {
			mem += DefaultMemoryRequest
		}
	}
	if cpu > 0 {
		c[corev1.ResourceCPU] = addSat(c[corev1.ResourceCPU], cpu)
	}
	if mem > 0 {
		c[corev1.ResourceMemory] = addSat(c[corev1.ResourceMemory], mem)
	}
	return c
}

// Node is one candidate node.
type Node struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable Resources
	// Requested is what the node's pods already request, without the
	// incoming pod; cpu and memory include the 100m/200Mi default of every
	// container lacking the key, as kube-scheduler's NonZeroRequested does.
	Requested Resources
}

// addSat adds non-negative amounts, saturating instead of wrapping, so a
// pathological exbibyte node cannot turn a clamp into a negative score.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
