package scoring

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxNodeScore is the framework's per-plugin maximum.
const MaxNodeScore int64 = 100

// Scorer holds a validated configuration. It is immutable and safe for
// concurrent use.
type Scorer struct {
	fit           map[corev1.ResourceName]ResourcesType
	scarce        map[corev1.ResourceName]struct{}
	wFit, wScarce int64
}

// New validates cfg and compiles it. Untracked names are dropped here, so
// they can never be scored or counted as scarce.
func New(cfg Config) (*Scorer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scorer{
		fit:     make(map[corev1.ResourceName]ResourcesType, len(cfg.FitPlus)),
		scarce:  make(map[corev1.ResourceName]struct{}, len(cfg.Scarce)),
		wFit:    pluginWeight(cfg.PluginWeights[PluginFitPlus]),
		wScarce: pluginWeight(cfg.PluginWeights[PluginScarce]),
	}
	for name, rt := range cfg.FitPlus {
		if Tracked(name) {
			s.fit[name] = rt
		}
	}
	for _, name := range cfg.Scarce {
		if Tracked(name) {
			s.scarce[name] = struct{}{}
		}
	}
	return s, nil
}

// pluginWeight applies kube-scheduler's defaulting: an unset or zero score
// plugin weight is 1.
func pluginWeight(w int64) int64 {
	if w == 0 {
		return 1
	}
	return w
}

// NodeScore is one node's result; the JSON form is SCORER.md's ranking entry.
type NodeScore struct {
	Node    string `json:"node"`
	FitPlus int64  `json:"fitPlus"`
	Scarce  int64  `json:"scarce"`
	Total   int64  `json:"total"`
}

// Compare orders best first: total descending, then node name ascending
// in byte order, jetqueue's replacement for kube-scheduler's random pick.
// The fitPlus tail only separates duplicate names, making the order total
// so that an unstable sort is still deterministic.
func (a NodeScore) Compare(b NodeScore) int {
	if a.Total != b.Total {
		return cmp.Compare(b.Total, a.Total)
	}
	if c := strings.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return cmp.Compare(b.FitPlus, a.FitPlus)
}

// Score scores one node for pod.
func (s *Scorer) Score(pod *Pod, node *Node) NodeScore {
	return s.plan(pod).score(node, nil)
}

// Rank scores every node, feasible or not, and returns them best first.
func (s *Scorer) Rank(pod *Pod, nodes []Node) []NodeScore {
	p := s.plan(pod)
	out := make([]NodeScore, len(nodes))
	for i := range nodes {
		out[i] = p.score(&nodes[i], nil)
	}
	slices.SortFunc(out, NodeScore.Compare)
	return out
}

// plan is the per-pod work done once per ranking instead of once per node.
type plan struct {
	s   *Scorer
	pod *Pod
	// scored is S = P ∩ config with the pod's charge, by name so that the
	// weighted sum is computed in a fixed order.
	scored []scoredResource
	// charge is what placing the pod adds to a node.
	charge Resources
}

type scoredResource struct {
	name   corev1.ResourceName
	rt     ResourcesType
	charge int64
}

func (s *Scorer) plan(pod *Pod) *plan {
	p := &plan{s: s, pod: pod, charge: pod.Charge()}
	for name, v := range pod.Requests {
		rt, ok := s.fit[name]
		if v <= 0 || !ok || rt.Weight == 0 {
			// Not requested, not configured, or weighted out: none of
			// these contributes to either sum.
			continue
		}
		p.scored = append(p.scored, scoredResource{name: name, rt: rt, charge: p.charge[name]})
	}
	slices.SortFunc(p.scored, func(a, b scoredResource) int { return cmp.Compare(a.name, b.name) })
	return p
}

// score computes both plugins; added is usage placed on the node by
// earlier pods of the same Place call.
func (p *plan) score(node *Node, added Resources) NodeScore {
	fit, scarce := p.fitPlus(node, added), p.scarceScore(node)
	return NodeScore{
		Node:    node.Name,
		FitPlus: fit,
		Scarce:  scarce,
		Total:   fit*p.s.wFit + scarce*p.s.wScarce,
	}
}

// fitPlus is floor(Σ w·score / Σ w) over S, each resource score floored
// first; 100 when nothing carries weight.
func (p *plan) fitPlus(node *Node, added Resources) int64 {
	var num, den int64
	for _, r := range p.scored {
		a := node.Allocatable[r.name]
		u := addSat(addSat(max(node.Requested[r.name], 0), max(added[r.name], 0)), r.charge)
		num += r.rt.Weight * resourceScore(r.rt.Type, u, a)
		den += r.rt.Weight
	}
	if den == 0 {
		return MaxNodeScore
	}
	return num / den
}

// resourceScore is kube-scheduler's most/least allocated formula for one
// resource; a node without the resource scores 0 (its weight still counts).
func resourceScore(t Strategy, u, a int64) int64 {
	if a <= 0 {
		return 0
	}
	switch t {
	case MostAllocated:
		return percentOf(min(u, a), a)
	case LeastAllocated:
		if u > a {
			return 0
		}
		return percentOf(a-u, a)
	}
	// Koordinator scores an unknown strategy 0; Validate keeps it out.
	return 0
}

// percentOf is floor(x·100/a) for 0 ≤ x ≤ a, a > 0, in 128 bits so that
// even exbibyte amounts cannot overflow.
func percentOf(x, a int64) int64 {
	hi, lo := bits.Mul64(uint64(x), uint64(MaxNodeScore))
	q, _ := bits.Div64(hi, lo, uint64(a))
	return int64(q)
}

// scarceScore penalises nodes by the share of their unrequested resource
// types that are scarce: floor((|D|-|K|)·100/|D|), 100 when |D| or |K| is 0.
func (p *plan) scarceScore(node *Node) int64 {
	if len(p.s.scarce) == 0 {
		return MaxNodeScore
	}
	var d, k int64
	for name, a := range node.Allocatable {
		if a <= 0 || !Tracked(name) || p.pod.Requests[name] > 0 {
			continue
		}
		d++
		if _, ok := p.s.scarce[name]; ok {
			k++
		}
	}
	if d == 0 || k == 0 {
		return MaxNodeScore
	}
	return (d - k) * MaxNodeScore / d
}
