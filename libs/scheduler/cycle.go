package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// RequeueReason tells the queue how to treat a head that was not admitted
// (Kueue's RequeueReason; see queue.Requeue for its effect).
type RequeueReason int

const (
	RequeueGeneric RequeueReason = iota
	RequeueNamespaceMismatch
	RequeueFailedAfterNomination
	RequeuePendingPreemption
)

// Outcome is what the cycle decided for one head.
type Outcome int

const (
	// NotAdmitted: the head goes back to its queue with a Reason.
	NotAdmitted Outcome = iota
	// Admitted: the head reserves quota with its Assignment.
	Admitted
	// Blocked: the head would be admitted but blockAdmission holds every
	// admission until the admitted workloads are PodsReady; it keeps its
	// place and is admitted with this Assignment once the block lifts.
	Blocked
)

// Options are the cycle-wide switches of the configuration.
type Options struct {
	// BlockAdmission is waitForPodsReady.blockAdmission.
	BlockAdmission bool
	// NotReady says some admitted workload is not PodsReady yet.
	NotReady bool
}

// Entry is one head's decision in a cycle.
type Entry struct {
	Workload   *Workload
	Assignment Assignment
	Outcome    Outcome
	Requeue    RequeueReason
	// Reason is set for every head that is not admitted.
	Reason *Reason
	// Tried is the retry state to keep with the workload (nil clears it).
	Tried *TriedFlavors
	// Targets are the victims this entry preempts; it is admitted in a
	// later cycle, once they have released their quota.
	Targets []Target

	nominated bool
	skipped   bool
	targets   []Target
}

// Admission renders an admitted entry's assignment.
func (e *Entry) Admission() Admission {
	ad := Admission{ClusterQueue: e.Workload.ClusterQueue, Usage: e.Assignment.Usage.Clone()}
	for _, ps := range e.Assignment.PodSets {
		pa := PodSetAdmission{Name: ps.Name, Count: ps.Count,
			Flavors: map[corev1.ResourceName]string{}, Usage: map[corev1.ResourceName]int64{}}
		for r, c := range ps.Flavors {
			pa.Flavors[r] = c.Flavor
			pa.Usage[r] = ps.Requests[r]
		}
		ad.PodSets = append(ad.PodSets, pa)
	}
	return ad
}

// Admission is a workload's quota reservation: its ClusterQueue, the
// flavor per podSet and resource, and the pod counts (partial admission).
type Admission struct {
	ClusterQueue string            `json:"clusterQueue"`
	PodSets      []PodSetAdmission `json:"podSetAssignments"`
	Usage        quota.Usage       `json:"-"`
}

// TotalUsage sums the podSets' usage per flavor and resource, as Usage
// holds for an admission decided in-process; it rebuilds it for one that
// was decoded from an event.
func (a *Admission) TotalUsage() quota.Usage {
	u := quota.Usage{}
	for _, ps := range a.PodSets {
		for r, f := range ps.Flavors {
			u[quota.FlavorResource{Flavor: f, Resource: r}] += ps.Usage[r]
		}
	}
	return u
}

// PodSetAdmission is one podSet's part of an Admission.
type PodSetAdmission struct {
	Name    string                         `json:"name"`
	Count   int32                          `json:"count"`
	Flavors map[corev1.ResourceName]string `json:"flavors"`
	Usage   map[corev1.ResourceName]int64  `json:"resourceUsage"`
}

// Schedule runs one scheduling cycle (Kueue's scheduler.schedule) over an
// immutable snapshot: it nominates every head, orders the entries, and
// walks them granting quota, at most one admission per cohort when they
// compete for the same cells. It reads nothing else and changes nothing;
// the caller applies the returned entries.
func Schedule(s *Snapshot, heads []*Workload, opts Options) []Entry {
	entries := make([]Entry, 0, len(heads))
	for _, wl := range heads {
		entries = append(entries, nominate(s, wl))
	}
	slices.SortStableFunc(entries, entryOrder)

	cycleUsage := map[string]quota.Usage{}
	cohortsDone := map[string]bool{}
	targeted := map[string]bool{}
	blocked := opts.BlockAdmission && opts.NotReady
	stopped := false
	for i := range entries {
		e := &entries[i]
		if stopped && e.nominated {
			// An earlier entry waits for PodsReady: this one is tried again
			// in a later cycle, as Kueue resumes the cycle after its wait.
			e.Requeue = RequeueFailedAfterNomination
		}
		if stopped || !e.nominated {
			continue
		}
		mode := e.Assignment.Mode()
		if mode == NoFit {
			continue
		}
		cq := s.ClusterQueues[e.Workload.ClusterQueue]
		if co := cq.Cohort; co != nil {
			common := commonCells(cycleUsage[co.Name], e.Assignment.Usage)
			if len(common) > 0 && ((mode == Fit && !cq.fitsInCohort(common)) || (mode == Preempt && cohortsDone[co.Name])) {
				e.skipped = true
				e.Tried = nil
				e.Reason = &Reason{Token: CohortContention, Cohort: co.Name,
					Message: "other workloads in the cohort were prioritized"}
				continue
			}
			if cycleUsage[co.Name] == nil {
				cycleUsage[co.Name] = quota.Usage{}
			}
			cycleUsage[co.Name].Add(toReserve(e, cq))
		}
		if mode != Fit {
			if len(e.targets) == 0 {
				continue
			}
			// Two preemptors must never count on the same victim.
			if slices.ContainsFunc(e.targets, func(t Target) bool { return targeted[t.Workload.Key] }) {
				e.skipped = true
				e.Tried = nil
				e.Reason = &Reason{Token: CohortContention, Message: "other workloads in the cohort were prioritized"}
				continue
			}
			for _, t := range e.targets {
				targeted[t.Workload.Key] = true
			}
			e.Targets = e.targets
			e.Tried = nil
			e.Requeue = RequeuePendingPreemption
			e.Reason = &Reason{Token: WaitingForPreemptedWorkloads, PodSet: e.Reason.PodSet, Resource: e.Reason.Resource,
				Flavor: e.Reason.Flavor, Cohort: e.Reason.Cohort, Shortfall: e.Reason.Shortfall,
				Message: fmt.Sprintf("%s. Pending the preemption of %d workload(s)", e.Reason.Message, len(e.targets))}
			if cq.Cohort != nil {
				cohortsDone[cq.Cohort.Name] = true
			}
			continue
		}
		if cq.Cohort != nil {
			cohortsDone[cq.Cohort.Name] = true
		}
		if blocked {
			e.Outcome = Blocked
			e.Reason = &Reason{Token: WaitingForPodsReady,
				Message: "waiting for all admitted workloads to be in PodsReady condition"}
			stopped = true
			continue
		}
		e.Outcome = Admitted
		e.Reason = nil
		blocked = opts.BlockAdmission
	}
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Outcome == Admitted:
		case e.skipped && e.Requeue == RequeueGeneric:
			e.Requeue = RequeueFailedAfterNomination
		}
	}
	return entries
}

// entryOrder is the cycle order: entries that do not borrow first, then
// higher priority, then earlier queue time; the key breaks exact ties so
// that replays decide identically.
func entryOrder(a, b Entry) int {
	if a.Assignment.Borrowing != b.Assignment.Borrowing {
		if !a.Assignment.Borrowing {
			return -1
		}
		return 1
	}
	if a.Workload.Priority != b.Workload.Priority {
		return cmp.Compare(b.Workload.Priority, a.Workload.Priority)
	}
	if c := a.Workload.QueueTime.Compare(b.Workload.QueueTime); c != 0 {
		return c
	}
	return cmp.Compare(a.Workload.Key, b.Workload.Key)
}

// nominate checks a head and computes its flavor assignment.
func nominate(s *Snapshot, wl *Workload) Entry {
	e := Entry{Workload: wl, Tried: wl.LastTried}
	cq := s.ClusterQueues[wl.ClusterQueue]
	switch {
	case s.Inactive[wl.ClusterQueue] != "":
		e.Reason = &Reason{Token: ClusterQueueInactive,
			Message: fmt.Sprintf("ClusterQueue %s is inactive", wl.ClusterQueue)}
	case cq == nil:
		e.Reason = &Reason{Token: ClusterQueueNotFound,
			Message: fmt.Sprintf("ClusterQueue %s not found", wl.ClusterQueue)}
	case cq.NamespaceSelector == nil || !cq.NamespaceSelector.Matches(wl.NamespaceLabels):
		e.Reason = &Reason{Token: NamespaceMismatch,
			Message: "Workload namespace doesn't match ClusterQueue selector"}
		e.Requeue = RequeueNamespaceMismatch
	case wl.Misconfigured != "":
		e.Reason = &Reason{Token: Misconfigured, Message: wl.Misconfigured}
	default:
		e.nominated = true
		e.Assignment, e.targets = assignments(s, cq, wl)
		e.Tried = &e.Assignment.Tried
		if e.Assignment.Mode() != Fit {
			e.Reason = assignmentReason(&e.Assignment, cq)
		}
	}
	return e
}

// assignments is the full-size assignment with its preemption targets,
// or with partial admission the largest pod counts that fit or can fit
// by preemption (Kueue's getAssignments and PodSetReducer).
func assignments(s *Snapshot, cq *ClusterQueue, wl *Workload) (Assignment, []Target) {
	full := assignFlavors(s, cq, wl, nil)
	var targets []Target
	switch full.Mode() {
	case Fit:
		return full, nil
	case Preempt:
		targets = preemptionTargets(cq, wl, &full)
	}
	if len(targets) > 0 || !partiallyAdmissible(wl) {
		return full, targets
	}
	type candidate struct {
		a       Assignment
		targets []Target
	}
	if c, ok := reduceCounts(wl, func(counts []int32) (candidate, bool) {
		a := assignFlavors(s, cq, wl, counts)
		switch a.Mode() {
		case Fit:
			return candidate{a: a}, true
		case Preempt:
			if t := preemptionTargets(cq, wl, &a); len(t) > 0 {
				return candidate{a: a, targets: t}, true
			}
		}
		return candidate{}, false
	}); ok {
		return c.a, c.targets
	}
	return full, nil
}

func partiallyAdmissible(wl *Workload) bool {
	for _, ps := range wl.PodSets {
		if ps.MinCount != nil && *ps.MinCount < ps.Count {
			return true
		}
	}
	return false
}

// reduceCounts binary-searches the pod counts between full size and the
// minCounts, shrinking every variable podSet in proportion, for the
// largest counts that fit.
func reduceCounts[R any](wl *Workload, fits func([]int32) (R, bool)) (R, bool) {
	full := make([]int32, len(wl.PodSets))
	deltas := make([]int64, len(wl.PodSets))
	var total int64
	for i, ps := range wl.PodSets {
		full[i] = ps.Count
		if ps.MinCount != nil && *ps.MinCount < ps.Count {
			deltas[i] = int64(ps.Count - *ps.MinCount)
		}
		total += deltas[i]
	}
	var good R
	if total == 0 {
		return good, false
	}
	goodIdx := -1
	counts := make([]int32, len(full))
	idx := sort.Search(int(total)+1, func(i int) bool {
		for j := range full {
			counts[j] = full[j] - int32(deltas[j]*int64(i)/total)
		}
		a, ok := fits(slices.Clone(counts))
		if ok {
			good, goodIdx = a, i
		}
		return ok
	})
	return good, idx == goodIdx
}

// toReserve is what an entry holds back from its cohort for the rest of
// the cycle: a Fit entry its usage; a Preempt entry only the unused part of
// its nominal quota (or of its borrowing headroom when it may borrow).
func toReserve(e *Entry, cq *ClusterQueue) quota.Usage {
	if e.Assignment.Mode() != Preempt {
		return e.Assignment.Usage
	}
	r := quota.Usage{}
	for fr, v := range e.Assignment.Usage {
		l := cq.Limits[fr]
		switch {
		case !e.Assignment.Borrowing:
			r[fr] = max(0, min(v, l.Nominal-cq.Usage[fr]))
		case l.BorrowingLimit == nil:
			r[fr] = v
		default:
			r[fr] = min(v, quota.SatAdd(l.Nominal, *l.BorrowingLimit)-cq.Usage[fr])
		}
	}
	return r
}

// commonCells sums cycle and entry usage over the cells both hold.
func commonCells(cycle, entry quota.Usage) quota.Usage {
	var out quota.Usage
	for fr, v := range entry {
		if c, ok := cycle[fr]; ok {
			if out == nil {
				out = quota.Usage{}
			}
			out[fr] = c + v
		}
	}
	return out
}

// assignmentReason turns the first failing podSet into a Reason value.
func assignmentReason(a *Assignment, cq *ClusterQueue) *Reason {
	r := &Reason{Token: WaitingForQuota, Message: a.Message()}
	if cq.Cohort != nil {
		r.Cohort = cq.Cohort.Name
	}
	for _, ps := range a.PodSets {
		if !ps.notFit {
			continue
		}
		r.PodSet = ps.Name
		if b := ps.block; b != nil {
			r.Token, r.Flavor, r.Resource, r.Shortfall = b.token, b.flavor, string(b.resource), b.shortfall
		}
		break
	}
	return r
}
