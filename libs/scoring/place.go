package scoring

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Placement is where one pod of a podSet went.
type Placement struct {
	// Node is empty when no node was feasible; Unschedulable says why.
	Node          string
	Score         NodeScore
	Unschedulable *Unschedulable
}

// Unschedulable is the most frequent failed filter over the nodes, the
// value behind kube-scheduler's "0/N nodes are available" message.
type Unschedulable struct {
	Reason   Reason
	Resource corev1.ResourceName // set for InsufficientResource
	// Count nodes failed this way, out of Total.
	Count, Total int
}

func (u *Unschedulable) String() string {
	what := string(u.Reason)
	if u.Resource != "" {
		what += " " + string(u.Resource)
	}
	return fmt.Sprintf("0/%d nodes are available: %d %s", u.Total, u.Count, what)
}

// Place puts count pods on nodes one at a time, each on the best-ranked
// node that passes Filter given the pods placed before it; every placement
// adds the pod's Charge to that node. Once no node is feasible the
// remaining pods all report the same Unschedulable, since nothing changes
// any more. nodes are not modified.
func (s *Scorer) Place(pod *Pod, count int, nodes []Node) []Placement {
	if count <= 0 {
		return nil
	}
	p, fp := s.plan(pod), newFilterPlan(pod)
	// Only the node that receives a pod changes, so each node is filtered
	// and scored once up front and then only after it receives a pod.
	type nodeState struct {
		score NodeScore
		fail  FilterResult
		added Resources
	}
	st := make([]nodeState, len(nodes))
	eval := func(i int) {
		n := &st[i]
		if n.fail = fp.filter(&nodes[i], n.added); n.fail.Passed() {
			n.score = p.score(&nodes[i], n.added)
		}
	}
	// order holds the feasible nodes best first; after a placement only its
	// head moves, so it is re-inserted rather than the whole list re-sorted.
	order := make([]int, 0, len(nodes))
	for i := range nodes {
		if eval(i); st[i].fail.Passed() {
			order = append(order, i)
		}
	}
	byScore := func(i, j int) int { return st[i].score.Compare(st[j].score) }
	slices.SortFunc(order, byScore)
	out := make([]Placement, 0, count)
	for len(out) < count {
		if len(order) == 0 {
			u := mostFrequent(st, func(n nodeState) FilterResult { return n.fail })
			for len(out) < count {
				c := u
				out = append(out, Placement{Unschedulable: &c})
			}
			break
		}
		best := order[0]
		order = order[1:]
		out = append(out, Placement{Node: nodes[best].Name, Score: st[best].score})
		n := &st[best]
		if n.added == nil {
			n.added = make(Resources, len(p.charge))
		}
		for name, v := range p.charge {
			n.added[name] = addSat(n.added[name], v)
		}
		if eval(best); n.fail.Passed() {
			at, _ := slices.BinarySearchFunc(order, best, byScore)
			order = slices.Insert(order, at, best)
		}
	}
	return out
}

// mostFrequent counts failures by reason and resource; ties go to the
// smaller reason token, then resource name, so the answer is stable.
func mostFrequent[T any](nodes []T, fail func(T) FilterResult) Unschedulable {
	type key struct {
		reason   Reason
		resource corev1.ResourceName
	}
	counts := map[key]int{}
	for _, n := range nodes {
		f := fail(n)
		counts[key{f.Reason, f.Resource}]++
	}
	best := Unschedulable{Reason: NoNodes, Total: len(nodes)}
	for k, c := range counts {
		if c > best.Count || c == best.Count && cmp.Or(cmp.Compare(k.reason, best.Reason), cmp.Compare(k.resource, best.Resource)) < 0 {
			best.Reason, best.Resource, best.Count = k.reason, k.resource, c
		}
	}
	return best
}
