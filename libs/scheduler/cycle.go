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

// Schedule runs one whole scheduling cycle over an immutable snapshot, as
// if no wait for PodsReady ever ended: with blockAdmission and
// opts.NotReady the first entry that fits is held (Blocked) and the walk
// stops there; otherwise each entry that fits is admitted, and under
// blockAdmission the next one that fits is held. It changes nothing; the
// caller applies the returned entries. The engine drives a Pass itself, so
// that a held cycle can go on after the wait as Kueue's does.
func Schedule(s *Snapshot, heads []*Workload, opts Options) []Entry {
	p := Begin(s, heads)
	notReady := opts.BlockAdmission && opts.NotReady
	for i := p.Walk(); i >= 0; i = p.Walk() {
		if notReady {
			p.Hold(i)
			break
		}
		p.Admit(i)
		notReady = opts.BlockAdmission
	}
	p.Finish()
	return p.Entries
}

// Pass is one scheduling cycle in progress (Kueue's scheduler.schedule):
// Begin nominates every head and orders the entries; Walk then goes
// through them as Kueue's step 5 does, granting cohort capacity and
// issuing preemptions, and stops at each entry that fits, so that the
// caller decides, from the live state, whether blockAdmission holds it.
// Under blockAdmission Kueue's scheduler sleeps inside the cycle
// (pkg/cache/cache.go WaitForPodsReady) and, once woken, admits the held
// entry with the assignment computed before the wait and goes on with the
// rest of the same cycle's entries, over the same snapshot; the heads that
// were not admitted are requeued only when the walk has ended (Finish).
// A Pass reads only its snapshot and its own walk state.
type Pass struct {
	Entries []Entry
	// NoPreemption walks as if preemption were off: an entry that could
	// only be admitted by preempting is NoFit, and holds back nothing of
	// its cohort. The engine sets it for the rest of a run that has looped
	// (kueue#6947's ping-pong), where the preemption will not be issued:
	// otherwise the preemptor would keep reserving its cohort's quota and
	// leave workloads that fit pending.
	NoPreemption bool
	// next is the index of the first entry not walked yet.
	next        int
	snap        *Snapshot
	cycleUsage  map[string]quota.Usage
	cohortsDone map[string]bool
	targeted    map[string]bool
}

// Begin starts a cycle: it nominates every head and sorts the entries.
func Begin(s *Snapshot, heads []*Workload) *Pass {
	entries := make([]Entry, 0, len(heads))
	for _, wl := range heads {
		entries = append(entries, nominate(s, wl))
	}
	slices.SortStableFunc(entries, entryOrder)
	return &Pass{Entries: entries, snap: s, cycleUsage: map[string]quota.Usage{},
		cohortsDone: map[string]bool{}, targeted: map[string]bool{}}
}

// Next is the index of the first entry Walk has not reached yet; the
// entries before it are decided (or wait for Admit or Hold).
func (p *Pass) Next() int { return p.next }

// Walk decides the entries from where the walk stopped up to the next one
// that fits, and returns that one's index: the caller then calls Admit or
// Hold for it. It returns -1 once every entry is walked.
func (p *Pass) Walk() int {
	s := p.snap
	for p.next < len(p.Entries) {
		i := p.next
		p.next++
		e := &p.Entries[i]
		if !e.nominated {
			continue
		}
		mode := e.Assignment.Mode()
		if mode == NoFit || (mode == Preempt && p.NoPreemption) {
			continue
		}
		cq := s.ClusterQueues[e.Workload.ClusterQueue]
		if co := cq.Cohort; co != nil {
			common, fits := cq.fitsInCohortAfter(p.cycleUsage[co.Name], e.Assignment.Usage)
			if common && ((mode == Fit && !fits) || (mode == Preempt && p.cohortsDone[co.Name])) {
				e.skipped = true
				e.Tried = nil
				e.Reason = &Reason{Token: CohortContention, Cohort: co.Name,
					Message: "other workloads in the cohort were prioritized"}
				continue
			}
			if p.cycleUsage[co.Name] == nil {
				p.cycleUsage[co.Name] = quota.Usage{}
			}
			reserve(p.cycleUsage[co.Name], e, cq)
		}
		if mode != Fit {
			if len(e.targets) == 0 {
				continue
			}
			// Two preemptors must never count on the same victim.
			if slices.ContainsFunc(e.targets, func(t Target) bool { return p.targeted[t.Workload.Key] }) {
				e.skipped = true
				e.Tried = nil
				e.Reason = &Reason{Token: CohortContention, Message: "other workloads in the cohort were prioritized"}
				continue
			}
			for _, t := range e.targets {
				p.targeted[t.Workload.Key] = true
			}
			e.Targets = e.targets
			e.Tried = nil
			e.Requeue = RequeuePendingPreemption
			e.Reason = &Reason{Token: WaitingForPreemptedWorkloads, PodSet: e.Reason.PodSet, Resource: e.Reason.Resource,
				Flavor: e.Reason.Flavor, Cohort: e.Reason.Cohort, Shortfall: e.Reason.Shortfall,
				Message: fmt.Sprintf("%s. Pending the preemption of %d workload(s)", e.Reason.Message, len(e.targets))}
			if cq.Cohort != nil {
				p.cohortsDone[cq.Cohort.Name] = true
			}
			continue
		}
		// Kueue marks the cohort before admitting: once the entry is
		// admitted, or once it was held and then admitted after the wait.
		if cq.Cohort != nil {
			p.cohortsDone[cq.Cohort.Name] = true
		}
		return i
	}
	return -1
}

// Admit marks the entry Walk stopped at as admitted.
func (p *Pass) Admit(i int) {
	e := &p.Entries[i]
	e.Outcome = Admitted
	e.Reason = nil
}

// Hold marks the entry Walk stopped at as held by blockAdmission: it is
// admitted with its assignment once every admitted workload is PodsReady.
func (p *Pass) Hold(i int) {
	e := &p.Entries[i]
	e.Outcome = Blocked
	e.Reason = &Reason{Token: WaitingForPodsReady,
		Message: "waiting for all admitted workloads to be in PodsReady condition"}
}

// Finish sets how each entry that was not admitted goes back to its queue.
func (p *Pass) Finish() {
	for i := range p.Entries {
		e := &p.Entries[i]
		if e.Outcome != Admitted && e.skipped && e.Requeue == RequeueGeneric {
			e.Requeue = RequeueFailedAfterNomination
		}
	}
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
		if sameTried(wl.LastTried, e.Tried) {
			// The same retry state: the workload keeps the one it has, so
			// that what was derived from it (the engine's fingerprint
			// share) stays valid.
			e.Tried = wl.LastTried
		}
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

// sameTried reports whether two retry states hold the same generations
// and indexes, nil maps and slices told from empty ones.
func sameTried(a, b *TriedFlavors) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.ClusterQueueGen != b.ClusterQueueGen || a.CohortGen != b.CohortGen ||
		len(a.Index) != len(b.Index) || (a.Index == nil) != (b.Index == nil) {
		return false
	}
	for i, m := range a.Index {
		o := b.Index[i]
		if len(m) != len(o) || (m == nil) != (o == nil) {
			return false
		}
		for r, v := range m {
			if w, ok := o[r]; !ok || w != v {
				return false
			}
		}
	}
	return true
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

// reserve adds to dst (with quota.Usage.Add's saturation) what an entry
// holds back from its cohort for the rest of the cycle: a Fit entry its
// usage; a Preempt entry only the unused part of its nominal quota (or of
// its borrowing headroom when it may borrow), every cell of its usage
// listed, zeros included.
func reserve(dst quota.Usage, e *Entry, cq *ClusterQueue) {
	if e.Assignment.Mode() != Preempt {
		dst.Add(e.Assignment.Usage)
		return
	}
	for fr, v := range e.Assignment.Usage {
		l := cq.Limits[fr]
		var r int64
		switch {
		case !e.Assignment.Borrowing:
			r = max(0, min(v, l.Nominal-cq.Usage[fr]))
		case l.BorrowingLimit == nil:
			r = v
		default:
			r = min(v, quota.SatAdd(l.Nominal, *l.BorrowingLimit)-cq.Usage[fr])
		}
		s, fits := quota.AddInt(dst[fr], r)
		if !fits {
			s = quota.SatAdd(dst[fr], r)
		}
		dst[fr] = s
	}
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
