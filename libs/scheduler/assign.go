package scheduler

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// Mode says how a flavor could be assigned, from worst to best.
type Mode int

const (
	// NoFit: not enough quota even if the queue's own workloads left.
	NoFit Mode = iota
	// Preempt: would fit in nominal quota (or borrowable quota) once
	// others release it, by preemption or by waiting.
	Preempt
	// Fit: fits now.
	Fit
)

func (m Mode) String() string { return [...]string{"NoFit", "Preempt", "Fit"}[m] }

// FlavorChoice is the flavor picked for one resource of one podSet.
type FlavorChoice struct {
	Flavor string
	Mode   Mode
	Borrow bool
	// TriedIdx is where the flavor search stopped; -1 means it reached the
	// end of the group and the next attempt starts over.
	TriedIdx int
}

// PodSetAssignment is the outcome of flavor assignment for one podSet.
type PodSetAssignment struct {
	Name  string
	Count int32
	// Flavors is empty when the podSet does not fit anywhere.
	Flavors  map[corev1.ResourceName]FlavorChoice
	Requests map[corev1.ResourceName]int64
	// notFit is false when every resource fits (Kueue's nil status).
	notFit  bool
	reasons []string
	block   *blocker
}

// blocker is the first cell that stopped a flavor, kept for the Reason.
type blocker struct {
	token     string
	flavor    string
	resource  corev1.ResourceName
	shortfall int64
}

// Mode is the worst mode over the podSet's resources.
func (p *PodSetAssignment) Mode() Mode {
	if !p.notFit {
		return Fit
	}
	if len(p.Flavors) == 0 {
		return NoFit
	}
	m := Fit
	for _, c := range p.Flavors {
		m = min(m, c.Mode)
	}
	return m
}

// Assignment is the flavor assignment of a whole workload.
type Assignment struct {
	PodSets   []PodSetAssignment
	Borrowing bool
	Usage     quota.Usage
	Tried     TriedFlavors
}

// Mode is the worst mode over all podSets; NoFit when nothing was assigned.
func (a *Assignment) Mode() Mode {
	if len(a.PodSets) == 0 {
		return NoFit
	}
	m := Fit
	for i := range a.PodSets {
		m = min(m, a.PodSets[i].Mode())
	}
	return m
}

// Message renders Kueue v0.6's wording of why the assignment is not Fit:
// per podSet that does not fit, its reasons sorted and joined.
func (a *Assignment) Message() string {
	var b strings.Builder
	for _, ps := range a.PodSets {
		if !ps.notFit {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("couldn't assign flavors to pod set ")
		b.WriteString(ps.Name)
		b.WriteString(": ")
		reasons := ps.reasons
		if len(reasons) > 1 {
			reasons = slices.Clone(reasons)
			sort.Strings(reasons)
		}
		for i, r := range reasons {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r)
		}
	}
	return b.String()
}

// assignFlavors picks a flavor for every resource of every podSet, with
// counts overriding the podSet counts (partial admission) when non-nil.
func assignFlavors(s *Snapshot, cq *ClusterQueue, wl *Workload, counts []int32) Assignment {
	last := wl.LastTried
	if last != nil && (cq.Generation > last.ClusterQueueGen ||
		(cq.Cohort != nil && cq.Cohort.Generation > last.CohortGen)) {
		last = nil
	}
	a := Assignment{Usage: quota.Usage{}, Tried: TriedFlavors{ClusterQueueGen: cq.Generation}}
	if cq.Cohort != nil {
		a.Tried.CohortGen = cq.Cohort.Generation
	}
	_, coversPods := cq.GroupOf[corev1.ResourcePods]
	var choiceBufs [2][8]resourceChoice
	for i := range wl.PodSets {
		ps := &wl.PodSets[i]
		count := ps.Count
		if counts != nil {
			count = counts[i]
		}
		req, overflow := ps.requests(count, counts == nil, coversPods)
		psa := PodSetAssignment{Name: ps.Name, Count: count, Requests: req,
			Flavors: make(map[corev1.ResourceName]FlavorChoice, len(req))}
		if overflow != "" {
			// Validation refuses such a workload at the door; one that got
			// into the log anyway never fits, and says why.
			psa.Flavors = nil
			psa.notFit = true
			psa.reasons = []string{fmt.Sprintf("request of %s overflows int64", overflow)}
			psa.block = &blocker{token: ExceedsMaxQuota, resource: overflow, shortfall: math.MaxInt64}
			a.add(&psa)
			return a
		}
		var buf [8]corev1.ResourceName
		names := buf[:0]
		for r := range req {
			names = append(names, r)
		}
		slices.Sort(names)
		for _, r := range names {
			if _, done := psa.Flavors[r]; done {
				continue
			}
			g, ok := cq.GroupOf[r]
			if !ok {
				psa.Flavors = nil
				psa.notFit = true
				psa.reasons = []string{fmt.Sprintf("resource %s unavailable in ClusterQueue", r)}
				psa.block = &blocker{token: NoMatchingFlavor, resource: r}
				break
			}
			lastIdx := -1
			if last != nil && len(last.Index) > i {
				if v, ok := last.Index[i][r]; ok {
					lastIdx = v
				}
			}
			choices, st := a.findFlavor(s, cq, &cq.Groups[g], req, ps, lastIdx, &choiceBufs)
			if len(choices) == 0 {
				psa.Flavors = nil
				psa.notFit = true
				psa.reasons = st.reasons
				psa.block = st.first()
				break
			}
			for _, c := range choices {
				psa.Flavors[c.resource] = c.FlavorChoice
			}
			if st != nil {
				psa.notFit = true
				psa.reasons = append(psa.reasons, st.reasons...)
				if psa.block == nil {
					psa.block = st.first()
				}
			}
		}
		a.add(&psa)
		if len(req) > 0 && len(psa.Flavors) == 0 {
			return a
		}
	}
	return a
}

// ForgetRequests drops the requests its podSets keep for the next
// attempt: an admitted workload is not attempted again until it loses its
// quota, and may run for a long time.
func (w *Workload) ForgetRequests() {
	for i := range w.PodSets {
		w.PodSets[i].reqs = nil
	}
}

// CachesNoRequests reports whether ForgetRequests left it so.
func (w *Workload) CachesNoRequests() bool {
	for i := range w.PodSets {
		if w.PodSets[i].reqs != nil {
			return false
		}
	}
	return true
}

// requests is podSetRequests, kept for the full count (full), which every
// attempt but partial admission's asks for. The map is shared by the
// assignments made from it, which only read it.
func (ps *PodSet) requests(count int32, full, coversPods bool) (map[corev1.ResourceName]int64, corev1.ResourceName) {
	if !full {
		return podSetRequests(ps, count, coversPods)
	}
	if c := ps.reqs; c != nil && c.count == count && c.coversPods == coversPods {
		return c.req, c.overflow
	}
	req, overflow := podSetRequests(ps, count, coversPods)
	ps.reqs = &podSetReqs{count: count, coversPods: coversPods, req: req, overflow: overflow}
	return req, overflow
}

// podSetRequests is the podSet's total per resource (per-pod request ×
// count), or the first resource, in name order, whose total overflows int64.
func podSetRequests(ps *PodSet, count int32, coversPods bool) (map[corev1.ResourceName]int64, corev1.ResourceName) {
	req := make(map[corev1.ResourceName]int64, len(ps.PerPod)+1)
	var overflow corev1.ResourceName
	for r, v := range ps.PerPod {
		total, ok := quota.MulInt(v, int64(count))
		if !ok && (overflow == "" || r < overflow) {
			overflow = r
		}
		req[r] = total
	}
	if coversPods {
		req[corev1.ResourcePods] = int64(count)
	}
	return req, overflow
}

// exceeds reports whether the usage sum a+b is above limit. A sum beyond
// int64 is above every limit, since no limit is larger (quota.AddInt).
func exceeds(a, b, limit int64) bool {
	s, ok := quota.AddInt(a, b)
	return !ok || s > limit
}

func (a *Assignment) add(psa *PodSetAssignment) {
	idx := make(map[corev1.ResourceName]int, len(psa.Flavors))
	for r, c := range psa.Flavors {
		a.Borrowing = a.Borrowing || c.Borrow
		fr := quota.FlavorResource{Flavor: c.Flavor, Resource: r}
		a.Usage[fr] = quota.SatAdd(a.Usage[fr], psa.Requests[r])
		idx[r] = c.TriedIdx
	}
	a.PodSets = append(a.PodSets, *psa)
	a.Tried.Index = append(a.Tried.Index, idx)
}

type status struct {
	reasons  []string
	blockers []blocker
}

func (s *status) add(b blocker, format string, args ...any) {
	s.addMessage(b, fmt.Sprintf(format, args...))
}

func (s *status) addMessage(b blocker, msg string) {
	s.reasons = append(s.reasons, msg)
	s.blockers = append(s.blockers, b)
}

// first prefers a quota blocker over a flavor mismatch: it is the more
// useful answer to "what would let this in".
func (s *status) first() *blocker {
	if s == nil || len(s.blockers) == 0 {
		return nil
	}
	for i := range s.blockers {
		if s.blockers[i].token != NoMatchingFlavor {
			return &s.blockers[i]
		}
	}
	return &s.blockers[0]
}

// resourceChoice is the flavor picked for one resource.
type resourceChoice struct {
	resource corev1.ResourceName
	FlavorChoice
}

// findFlavor walks one resource group's flavors in order (KEP-582): it
// skips flavors up to lastIdx, filters by taints and node labels, checks
// quota, and stops early as flavorFungibility says. It returns the best
// flavor's choice per resource of the group the podSet requests, in
// resource order, in bufs (the caller's scratch space) unless the group
// covers more resources; none if no flavor was assigned.
func (a *Assignment) findFlavor(s *Snapshot, cq *ClusterQueue, g *ResourceGroup,
	req map[corev1.ResourceName]int64, ps *PodSet, lastIdx int, bufs *[2][8]resourceChoice) ([]resourceChoice, *status) {
	st := &status{}
	var buf [8]corev1.ResourceName
	covered := buf[:0]
	for _, r := range g.Covered {
		if _, ok := req[r]; ok {
			covered = append(covered, r)
		}
	}
	slices.Sort(covered)
	selector, anyNode := flavorSelector(ps, g)
	// Two buffers: the best flavor's choices and the current flavor's.
	var best []resourceChoice
	bestMode := NoFit
	stoppedAt := -1
	for idx, name := range g.Flavors {
		if idx <= lastIdx {
			continue
		}
		f := s.Flavors[name]
		if f == nil {
			st.add(blocker{token: NoMatchingFlavor, flavor: name}, "flavor %s not found", name)
			continue
		}
		// A flavor without taints taints nothing, and a podSet without node
		// constraints on the group's keys matches every node: the checks
		// are skipped for them, as they would allocate for nothing.
		if len(f.Taints) > 0 {
			if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), f.Taints, ps.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false); bad {
				st.add(blocker{token: NoMatchingFlavor, flavor: name}, "untolerated taint %s in flavor %s", taint.ToString(), name)
				continue
			}
		}
		if !anyNode {
			if ok, err := selector.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: f.NodeLabels}}); !ok || err != nil {
				st.add(blocker{token: NoMatchingFlavor, flavor: name}, "flavor %s doesn't match node affinity", name)
				continue
			}
		}
		stoppedAt = idx
		borrow := false
		mode := Fit
		// The buffer best does not hold.
		choices := bufs[0][:0]
		if len(best) > 0 && &best[:1][0] == &bufs[0][0] {
			choices = bufs[1][:0]
		}
		if len(covered) > len(bufs[0]) {
			choices = make([]resourceChoice, 0, len(covered))
		}
		for _, r := range covered {
			fr := quota.FlavorResource{Flavor: name, Resource: r}
			m, b := fitsQuotaAfter(cq, fr, req[r], a.Usage[fr], st)
			mode = min(mode, m)
			borrow = borrow || b
			if mode == NoFit {
				break
			}
			choices = append(choices, resourceChoice{resource: r, FlavorChoice: FlavorChoice{Flavor: name, Mode: m, Borrow: b}})
		}
		if !tryNextFlavor(mode, cq.Fungibility, borrow) {
			best, bestMode = choices, mode
			break
		}
		if mode > bestMode {
			best, bestMode = choices, mode
		}
	}
	tried := stoppedAt
	if stoppedAt == len(g.Flavors)-1 {
		tried = -1
	}
	for i := range best {
		best[i].TriedIdx = tried
	}
	if bestMode == Fit {
		return best, nil
	}
	return best, st
}

// tryNextFlavor is KEP-582's table: whether a flavor with this outcome is
// good enough to stop the search.
func tryNextFlavor(m Mode, f api.FlavorFungibility, borrow bool) bool {
	switch {
	case m == Fit && !borrow:
		return false
	case m == Fit && f.WhenCanBorrow == api.FungibilityBorrow:
		return false
	case m == Preempt && f.WhenCanPreempt == api.FungibilityPreempt &&
		(!borrow || f.WhenCanBorrow == api.FungibilityBorrow):
		return false
	}
	return true
}

// fitsQuotaAfter is fitsQuota for the podSet's request of one cell on top
// of what the workload's earlier podSets already take there; a sum beyond
// int64 fits nowhere.
func fitsQuotaAfter(cq *ClusterQueue, fr quota.FlavorResource, request, earlier int64, st *status) (Mode, bool) {
	val, ok := quota.AddInt(request, earlier)
	if !ok {
		st.add(blocker{token: ExceedsMaxQuota, flavor: fr.Flavor, resource: fr.Resource, shortfall: math.MaxInt64},
			"request of %s in flavor %s overflows int64", fr.Resource, fr.Flavor)
		return NoFit, false
	}
	return fitsQuota(cq, fr, val, st)
}

// fitsQuota decides how val of one cell fits the queue (Kueue's
// fitsResourceQuota), recording why it does not fit into st. It reads each
// of the cell's limits, usage and cohort pools once (requestable,
// cohortUsed and maxAttainable over values already looked up), and builds
// its messages by concatenation: the same text as their fmt forms.
func fitsQuota(cq *ClusterQueue, fr quota.FlavorResource, val int64, st *status) (Mode, bool) {
	l := cq.Limits[fr]
	used := cq.Usage[fr]
	mode := NoFit
	borrow := false
	if val <= l.Nominal {
		mode = Preempt
	}
	requestable, cohortUsed := l.Nominal, used
	if co := cq.Cohort; co != nil {
		requestable = quota.SatAdd(co.Requestable[fr], l.Guaranteed())
		cohortUsed = quota.SatAdd(co.Used[fr], min(used, l.Guaranteed()))
	}
	if bw := cq.Preemption.BorrowWithinCohort; bw != nil && bw.Policy != "" && bw.Policy != api.BorrowWithinCohortNever {
		if (l.BorrowingLimit == nil || val <= quota.SatAdd(l.Nominal, *l.BorrowingLimit)) && val <= requestable {
			mode = Preempt
			borrow = val > l.Nominal
		}
	}
	// token is WaitingForQuota unless val is above what the queue could
	// ever hold (maxAttainable); only a cell that does not fit needs it.
	token := func() string {
		m := requestable
		if l.BorrowingLimit != nil {
			m = min(m, quota.SatAdd(l.Nominal, *l.BorrowingLimit))
		}
		if val > max(m, l.Nominal) {
			return ExceedsMaxQuota
		}
		return WaitingForQuota
	}
	res, flavor := string(fr.Resource), fr.Flavor
	if l.BorrowingLimit != nil {
		if limit := quota.SatAdd(l.Nominal, *l.BorrowingLimit); exceeds(used, val, limit) {
			st.addMessage(blocker{token: token(), flavor: fr.Flavor, resource: fr.Resource, shortfall: shortfall(used, val, limit)},
				"borrowing limit for "+res+" in flavor "+flavor+" exceeded")
			return mode, borrow
		}
	}
	lack := shortfall(cohortUsed, val, requestable)
	if lack <= 0 {
		return Fit, exceeds(used, val, l.Nominal)
	}
	b := blocker{token: token(), flavor: fr.Flavor, resource: fr.Resource, shortfall: lack}
	switch {
	case cq.Cohort != nil:
		st.addMessage(b, "insufficient unused quota in cohort for "+res+" in flavor "+flavor+", "+
			quota.Format(fr.Resource, lack)+" more needed")
	case mode == NoFit:
		st.addMessage(b, "insufficient quota for "+res+" in flavor "+flavor+" in ClusterQueue")
	default:
		st.addMessage(b, "insufficient unused quota for "+res+" in flavor "+flavor+", "+
			quota.Format(fr.Resource, lack)+" more needed")
	}
	return mode, borrow
}

// shortfall is used+val-limit, saturated: how much more than limit a usage
// sum is (negative: room left).
func shortfall(used, val, limit int64) int64 {
	s, ok := quota.AddInt(used, val)
	if !ok {
		return math.MaxInt64
	}
	return quota.SatAdd(s, -limit)
}

// flavorSelector keeps only the podSet's node constraints on label keys the
// group's flavors define, as kube-scheduler's NodeAffinity filter would see
// them on a node of that flavor; anyNode says none is left, so that it
// matches every node.
func flavorSelector(ps *PodSet, g *ResourceGroup) (sel nodeaffinity.RequiredNodeAffinity, anyNode bool) {
	var labels map[string]string
	for k, v := range ps.NodeSelector {
		if g.LabelKeys.Has(k) {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	var aff *corev1.Affinity
	if ps.Affinity != nil {
		var terms []corev1.NodeSelectorTerm
		for _, t := range ps.Affinity.NodeSelectorTerms {
			var exprs []corev1.NodeSelectorRequirement
			for _, e := range t.MatchExpressions {
				if g.LabelKeys.Has(e.Key) {
					exprs = append(exprs, e)
				}
			}
			// Terms are ORed: one that loses all its keys matches anything.
			if len(exprs) == 0 {
				terms = nil
				break
			}
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
		}
		if len(terms) != 0 {
			aff = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	return nodeaffinity.NewRequiredNodeAffinity(labels, aff), len(labels) == 0 && aff == nil
}
