package scheduler

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// AdmittedWorkload is a workload holding quota, as preemption sees it.
type AdmittedWorkload struct {
	Key          string
	UID          string
	ClusterQueue string
	Priority     int32
	// QueueTime is its queue-order timestamp, for LowerOrNewerEqualPriority.
	QueueTime  time.Time
	AdmittedAt time.Time
	// AdmissionSeq orders admissions made at the same instant (the clock
	// may not move between them), so "more recently admitted" stays total.
	AdmissionSeq uint64
	Usage        quota.Usage
	// PodSets is each podSet's share of Usage, in podSet order (nil: one
	// podSet holding all of Usage). A simulated preemption updates the
	// cohort podSet by podSet (see preemptionSim.add).
	PodSets []quota.Usage
	// mask caches cellMask for maskTable; Usage never changes once the
	// record is made.
	maskTable *cellTable
	mask      uint64
	maskOK    bool
}

// PreemptionKind says on what grounds a victim was chosen.
type PreemptionKind string

const (
	// InClusterQueue: a higher-priority (or older) workload of the same queue.
	InClusterQueue PreemptionKind = "InClusterQueue"
	// InCohortReclamation: the victim's queue borrowed quota the preemptor's
	// queue needs back to reach its nominal quota.
	InCohortReclamation PreemptionKind = "InCohortReclamation"
	// InCohortReclaimWhileBorrowing: as above, but the preemptor itself
	// borrows (borrowWithinCohort).
	InCohortReclaimWhileBorrowing PreemptionKind = "InCohortReclaimWhileBorrowing"
)

// Target is one victim of a preemption decision.
type Target struct {
	Workload    *AdmittedWorkload
	Kind        PreemptionKind
	Preemptor   string
	PreemptorCQ string
}

// needsPreemption lists the cells whose assignment mode is Preempt.
func needsPreemption(a *Assignment) map[quota.FlavorResource]bool {
	need := map[quota.FlavorResource]bool{}
	for _, ps := range a.PodSets {
		for r, c := range ps.Flavors {
			if c.Mode == Preempt {
				need[quota.FlavorResource{Flavor: c.Flavor, Resource: r}] = true
			}
		}
	}
	return need
}

// preemptionSim is a scratch copy of the usage of the preemptor's queue
// and its cohort, so candidates can be removed and put back without
// touching the snapshot. A member's usage is copied when a candidate of
// its own is first removed; until then it is read from the snapshot.
type preemptionSim struct {
	cq       *ClusterQueue
	usage    map[string]quota.Usage
	cohortOf quota.Usage
}

func newPreemptionSim(cq *ClusterQueue) *preemptionSim {
	s := &preemptionSim{cq: cq, usage: map[string]quota.Usage{cq.Name: cq.Usage.Clone()}}
	if cq.Cohort != nil {
		s.cohortOf = cq.Cohort.Used.Clone()
	}
	return s
}

// usageOf is a member's simulated usage; copy says the caller will change it.
func (s *preemptionSim) usageOf(m *ClusterQueue, copy bool) quota.Usage {
	u, ok := s.usage[m.Name]
	if !ok {
		u = m.Usage
		if copy {
			u = u.Clone()
			s.usage[m.Name] = u
		}
	}
	return u
}

func (s *preemptionSim) member(name string) *ClusterQueue {
	if name == s.cq.Name || s.cq.Cohort == nil {
		return s.cq
	}
	for _, m := range s.cq.Cohort.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// add adds (sign 1) or removes (sign -1) a workload's usage, keeping the
// cohort's usage-above-guarantee in step (KEP-1224) the way Kueue v0.6.3
// does (pkg/cache/snapshot.go AddWorkload and RemoveWorkload,
// pkg/cache/clusterqueue.go updateCohortUsage): the queue's usage takes the
// whole workload first; then, podSet by podSet, the cohort's usage of a
// cell gives back the share above guarantee the queue had before that
// podSet alone and takes the share it has after the whole workload. With
// one podSet per cell that is exact; with several podSets on a cell whose
// queue has a guarantee (a lendingLimit), the cohort is off by the
// clamping, and Kueue's preemption decides on that figure.
func (s *preemptionSim) add(w *AdmittedWorkload, sign int64) {
	m := s.member(w.ClusterQueue)
	u := s.usageOf(m, true)
	for fr, v := range w.Usage {
		u[fr] += sign * v
	}
	if s.cohortOf == nil {
		return
	}
	podSets := w.PodSets
	if podSets == nil {
		podSets = []quota.Usage{w.Usage}
	}
	for _, ps := range podSets {
		for fr, v := range ps {
			after := u[fr] - m.Limits[fr].Guaranteed()
			if before := after - v*sign; before > 0 {
				s.cohortOf[fr] -= before
			}
			if after > 0 {
				s.cohortOf[fr] += after
			}
		}
	}
}

// borrowing reports whether a queue uses more than its nominal quota of
// any needed cell; a cell the queue has no quota for counts as zero.
func (s *preemptionSim) borrowing(name string, need map[quota.FlavorResource]bool) bool {
	m := s.member(name)
	if m == nil || m.Cohort == nil {
		return false
	}
	u := s.usageOf(m, false)
	for fr := range need {
		if u[fr] > m.Limits[fr].Nominal {
			return true
		}
	}
	return false
}

// fits is Kueue's workloadFits over the simulated usage.
func (s *preemptionSim) fits(req quota.Usage, allowBorrowing bool) bool {
	cq := s.cq
	u := s.usage[cq.Name]
	for fr, v := range req {
		l := cq.Limits[fr]
		if cq.Cohort == nil || !allowBorrowing {
			if u[fr]+v > l.Nominal {
				return false
			}
		} else if l.BorrowingLimit != nil && u[fr]+v > l.Nominal+*l.BorrowingLimit {
			return false
		}
		if cq.Cohort != nil {
			used := s.cohortOf[fr] + min(u[fr], l.Guaranteed())
			if used+v > cq.requestable(fr) {
				return false
			}
		}
	}
	return true
}

// underNominal reports whether the queue is below nominal in every cell
// the workload requests (v0.6.3 #1980: only then may cohort candidates be
// considered without borrowing).
func underNominal(req quota.Usage, cq *ClusterQueue) bool {
	for fr := range req {
		if cq.Usage[fr] >= cq.Limits[fr].Nominal {
			return false
		}
	}
	return true
}

// preemptionTargets chooses the victims that let wl fit with assignment
// a, or none (Kueue v0.6.3 Preemptor.GetTargets, kueue-semantics §8).
func preemptionTargets(cq *ClusterQueue, wl *Workload, a *Assignment) []Target {
	victims, _ := chooseVictims(cq, wl, a)
	targets := make([]Target, 0, len(victims))
	for _, v := range victims {
		kind := InClusterQueue
		if v.ClusterQueue != cq.Name {
			kind = InCohortReclamation
			if a.Borrowing {
				kind = InCohortReclaimWhileBorrowing
			}
		}
		targets = append(targets, Target{Workload: v, Kind: kind, Preemptor: wl.Key, PreemptorCQ: cq.Name})
	}
	return targets
}

// fullRequests is what victims must make room for: the workload's full
// pod counts on the flavors of assignment a, as Kueue v0.6.3's
// totalRequestsForAssignment computes it even when a is a reduced (partial
// admission) assignment. A reduced count therefore only preempts if the
// full size would fit afterwards (upstream changed this in v0.9, #2826).
// A podSet left without a flavor (where Kueue v0.6 panics) means no
// targets.
func fullRequests(cq *ClusterQueue, wl *Workload, a *Assignment) (quota.Usage, bool) {
	_, coversPods := cq.GroupOf[corev1.ResourcePods]
	req := quota.Usage{}
	for i, ps := range wl.PodSets {
		if i >= len(a.PodSets) {
			return nil, false
		}
		// With pods covered, one pod requests one pod, whatever PerPod says.
		for r, v := range ps.PerPod {
			if coversPods && r == corev1.ResourcePods {
				continue
			}
			if !addFull(req, a.PodSets[i].Flavors, r, v, ps.Count) {
				return nil, false
			}
		}
		if coversPods && !addFull(req, a.PodSets[i].Flavors, corev1.ResourcePods, 1, ps.Count) {
			return nil, false
		}
	}
	return req, true
}

// addFull adds count pods' request v of r on r's flavor; false when r
// has none.
func addFull(req quota.Usage, flavors map[corev1.ResourceName]FlavorChoice, r corev1.ResourceName, v int64, count int32) bool {
	c, ok := flavors[r]
	if !ok {
		return false
	}
	req[quota.FlavorResource{Flavor: c.Flavor, Resource: r}] += v * int64(count)
	return true
}

// chooseVictims returns the victims and whether the preemptor was allowed
// to borrow when they were chosen.
func chooseVictims(cq *ClusterQueue, wl *Workload, a *Assignment) ([]*AdmittedWorkload, bool) {
	need := needsPreemption(a)
	cands := candidates(cq, wl, need)
	if len(cands) == 0 {
		return nil, false
	}
	// After the candidates: most heads that could preempt have none, and
	// either way there are no victims.
	req, ok := fullRequests(cq, wl, a)
	if !ok {
		return nil, false
	}
	// Copied only now: most heads that could preempt have no candidate.
	sim := newPreemptionSim(cq)
	slices.SortFunc(cands, func(x, y *AdmittedWorkload) int { return candidateOrder(x, y, cq.Name) })
	var own []*AdmittedWorkload
	for _, c := range cands {
		if c.ClusterQueue == cq.Name {
			own = append(own, c)
		}
	}
	bw := cq.Preemption.BorrowWithinCohort
	switch {
	case len(own) == len(cands):
		return minimalPreemptions(sim, req, cands, need, true, nil)
	case bw != nil && bw.Policy != "" && bw.Policy != api.BorrowWithinCohortNever:
		threshold := wl.Priority
		if bw.MaxPriorityThreshold != nil && *bw.MaxPriorityThreshold < threshold {
			threshold = *bw.MaxPriorityThreshold + 1
		}
		if !underNominal(req, cq) {
			cands = slices.DeleteFunc(cands, func(c *AdmittedWorkload) bool {
				return c.ClusterQueue != cq.Name && c.Priority >= threshold
			})
		}
		return minimalPreemptions(sim, req, cands, need, true, &threshold)
	}
	if underNominal(req, cq) {
		if v, allow := minimalPreemptions(sim, req, cands, need, false, nil); len(v) > 0 {
			return v, allow
		}
	}
	return minimalPreemptions(sim, req, own, need, true, nil)
}

// candidates lists the admitted workloads that the queue's policies allow
// to be preempted for wl and that use a needed cell.
func candidates(cq *ClusterQueue, wl *Workload, need map[quota.FlavorResource]bool) []*AdmittedWorkload {
	needMask := cq.cells.maskOf(need)
	uses := func(c *AdmittedWorkload) bool {
		if m, ok := c.cellMask(cq.cells); ok {
			return m&needMask != 0
		}
		for fr, v := range c.Usage {
			if need[fr] && v > 0 {
				return true
			}
		}
		return false
	}
	// skip reads the queue's keys, when it has them, for what rules a
	// workload out without loading its record: a priority the filter
	// refuses (rejects) or a mask, over the preemptor's cell table,
	// without a needed cell. The others are checked on the record as
	// before.
	skip := func(q *ClusterQueue, keys []admittedKey, i int, rejects func(int32) bool) bool {
		if keys == nil {
			return false
		}
		k := &keys[i]
		if rejects(k.priority) {
			return true
		}
		if q.cells != cq.cells {
			return false
		}
		if k.maskState == maskUnknown {
			k.maskState = maskNone
			if m, ok := q.Admitted[i].cellMask(q.cells); ok {
				k.maskState, k.mask = maskKnown, m
			}
		}
		return k.maskState == maskKnown && k.mask&needMask == 0
	}
	var out []*AdmittedWorkload
	p := cq.Preemption
	if p.WithinClusterQueue != "" && p.WithinClusterQueue != api.PreemptionNever {
		newerEqual := p.WithinClusterQueue == api.PreemptionLowerOrNewerEqualPriority
		rejects := func(prio int32) bool { return prio > wl.Priority || prio == wl.Priority && !newerEqual }
		keys := cq.admittedKeys()
		for i, c := range cq.Admitted {
			if skip(cq, keys, i, rejects) {
				continue
			}
			if c.Priority > wl.Priority {
				continue
			}
			if c.Priority == wl.Priority && !(newerEqual && wl.QueueTime.Before(c.QueueTime)) {
				continue
			}
			if uses(c) {
				out = append(out, c)
			}
		}
	}
	if cq.Cohort != nil && p.ReclaimWithinCohort != "" && p.ReclaimWithinCohort != api.PreemptionNever {
		lower := p.ReclaimWithinCohort == api.PreemptionLowerPriority
		rejects := func(prio int32) bool { return lower && prio >= wl.Priority }
		for _, m := range cq.Cohort.Members {
			if m == cq || !borrowingNow(m, need) {
				continue
			}
			keys := m.admittedKeys()
			for i, c := range m.Admitted {
				if skip(m, keys, i, rejects) {
					continue
				}
				if lower && c.Priority >= wl.Priority {
					continue
				}
				if uses(c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// borrowingNow is preemptionSim.borrowing before any simulated change: a
// member of a cohort uses more than its nominal quota of a needed cell.
func borrowingNow(m *ClusterQueue, need map[quota.FlavorResource]bool) bool {
	for fr := range need {
		if m.Usage[fr] > m.Limits[fr].Nominal {
			return true
		}
	}
	return false
}

// cellTable numbers a snapshot's quota cells (at most 64), so that the
// cells an admitted workload uses are a bit set: preemption tests each
// candidate against the cells it needs without hashing a string.
type cellTable struct {
	ids map[quota.FlavorResource]uint
}

// newCellTable numbers the cells the queues have limits for; nil when
// there are more than a bit set holds.
func newCellTable(cqs map[string]*ClusterQueue) *cellTable {
	t := &cellTable{ids: map[quota.FlavorResource]uint{}}
	for _, cq := range cqs {
		for fr := range cq.Limits {
			if _, ok := t.ids[fr]; !ok {
				t.ids[fr] = uint(len(t.ids))
			}
		}
	}
	if len(t.ids) > 64 {
		return nil
	}
	return t
}

// maskOf is the bit set of the numbered cells among need.
func (t *cellTable) maskOf(need map[quota.FlavorResource]bool) uint64 {
	var m uint64
	if t == nil {
		return 0
	}
	for fr := range need {
		if id, ok := t.ids[fr]; ok {
			m |= 1 << id
		}
	}
	return m
}

// cellMask is the bit set of the cells the workload uses (a positive
// amount), computed once per table; ok is false when there is no table or
// the workload uses a cell it does not number.
func (w *AdmittedWorkload) cellMask(t *cellTable) (uint64, bool) {
	if t == nil {
		return 0, false
	}
	if w.maskTable != t {
		w.maskTable, w.mask, w.maskOK = t, 0, true
		for fr, v := range w.Usage {
			if v <= 0 {
				continue
			}
			id, ok := t.ids[fr]
			if !ok {
				w.maskOK = false
				break
			}
			w.mask |= 1 << id
		}
	}
	return w.mask, w.maskOK
}

// candidateOrder: other queues' workloads first, then lower priority, then
// the most recently admitted, then key and UID for a stable order.
func candidateOrder(a, b *AdmittedWorkload, cq string) int {
	if aIn, bIn := a.ClusterQueue == cq, b.ClusterQueue == cq; aIn != bIn {
		if !aIn {
			return -1
		}
		return 1
	}
	if a.Priority != b.Priority {
		return cmp.Compare(a.Priority, b.Priority)
	}
	if c := b.AdmittedAt.Compare(a.AdmittedAt); c != 0 {
		return c
	}
	if c := cmp.Compare(b.AdmissionSeq, a.AdmissionSeq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.UID, b.UID); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

// minimalPreemptions removes candidates in order until the request fits,
// then puts back every victim but the last whose return still lets it fit.
// Borrowing stops being allowed once a cohort candidate at or above the
// threshold is taken.
func minimalPreemptions(sim *preemptionSim, req quota.Usage, cands []*AdmittedWorkload,
	need map[quota.FlavorResource]bool, allowBorrowing bool, threshold *int32) ([]*AdmittedWorkload, bool) {
	var victims []*AdmittedWorkload
	fits := false
	for _, c := range cands {
		if c.ClusterQueue != sim.cq.Name && !sim.borrowing(c.ClusterQueue, need) {
			continue
		}
		if c.ClusterQueue != sim.cq.Name && threshold != nil && c.Priority >= *threshold {
			allowBorrowing = false
		}
		sim.add(c, -1)
		victims = append(victims, c)
		if sim.fits(req, allowBorrowing) {
			fits = true
			break
		}
	}
	if !fits {
		for _, v := range victims {
			sim.add(v, 1)
		}
		return nil, false
	}
	for i := len(victims) - 2; i >= 0; i-- {
		sim.add(victims[i], 1)
		if sim.fits(req, allowBorrowing) {
			victims = slices.Delete(victims, i, i+1)
		} else {
			sim.add(victims[i], -1)
		}
	}
	for _, v := range victims {
		sim.add(v, 1)
	}
	return victims, allowBorrowing
}
