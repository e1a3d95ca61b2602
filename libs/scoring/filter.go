package scoring

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Reason is the token of a failed filter; the filters run in this order
// and the first failure is reported.
type Reason string

const (
	// NodeLabelsMismatch: the node lacks a label of the pod's node selector
	// (the assigned flavor's nodeLabels) or has another value for it.
	NodeLabelsMismatch Reason = "NodeLabelsMismatch"
	// UntoleratedTaint: a NoSchedule or NoExecute taint of the node is not
	// tolerated.
	UntoleratedTaint Reason = "UntoleratedTaint"
	// InsufficientResource: allocatable minus requested is below the pod's
	// request for a requested resource.
	InsufficientResource Reason = "InsufficientResource"
	// NoNodes: Place was given no node at all.
	NoNodes Reason = "NoNodes"
)

// Reasons lists every token, for docs and tests.
var Reasons = []Reason{NodeLabelsMismatch, UntoleratedTaint, InsufficientResource, NoNodes}

// FilterResult says whether a node passed and, if not, why. The zero value
// is a pass.
type FilterResult struct {
	Reason Reason
	// Label is the selector key that did not match (NodeLabelsMismatch).
	Label string
	// Taint is the first untolerated taint (UntoleratedTaint).
	Taint corev1.Taint
	// Resource and Shortfall name the first resource, by name, that does
	// not fit and how much of it must be freed for the pod to fit
	// (InsufficientResource).
	Resource  corev1.ResourceName
	Shortfall int64
}

// Passed reports whether every filter passed.
func (f FilterResult) Passed() bool { return f.Reason == "" }

func (f FilterResult) String() string {
	switch f.Reason {
	case "":
		return "fits"
	case NodeLabelsMismatch:
		return fmt.Sprintf("%s: label %s", f.Reason, f.Label)
	case UntoleratedTaint:
		return fmt.Sprintf("%s: %s", f.Reason, f.Taint.ToString())
	case InsufficientResource:
		return fmt.Sprintf("%s: %s short by %d", f.Reason, f.Resource, f.Shortfall)
	}
	return string(f.Reason)
}

// Filter runs the feasibility filters for pod on node.
func Filter(pod *Pod, node *Node) FilterResult {
	fp := newFilterPlan(pod)
	return fp.filter(node, nil)
}

// filterPlan holds the per-pod sorted keys so that the reported label or
// resource does not depend on map order.
type filterPlan struct {
	pod       *Pod
	selector  []string
	requested []corev1.ResourceName
}

func newFilterPlan(pod *Pod) filterPlan {
	fp := filterPlan{pod: pod, selector: sortedKeys(pod.NodeSelector)}
	for name, v := range pod.Requests {
		if v > 0 && Tracked(name) {
			fp.requested = append(fp.requested, name)
		}
	}
	slices.Sort(fp.requested)
	return fp
}

func (fp *filterPlan) filter(node *Node, added Resources) FilterResult {
	for _, k := range fp.selector {
		if v, ok := node.Labels[k]; !ok || v != fp.pod.NodeSelector[k] {
			return FilterResult{Reason: NodeLabelsMismatch, Label: k}
		}
	}
	if len(node.Taints) > 0 {
		// enableComparisonOperators=false as in libs/scheduler: the
		// numeric toleration operators are not part of the Kueue model.
		if t, bad := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Taints, fp.pod.Tolerations, hardTaint, false); bad {
			return FilterResult{Reason: UntoleratedTaint, Taint: t}
		}
	}
	for _, name := range fp.requested {
		free := node.Allocatable[name] - addSat(max(node.Requested[name], 0), max(added[name], 0))
		if need := fp.pod.Requests[name]; free < need {
			return FilterResult{Reason: InsufficientResource, Resource: name, Shortfall: need - free}
		}
	}
	return FilterResult{}
}

func hardTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}
