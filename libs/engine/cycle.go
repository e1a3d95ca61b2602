package engine

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// CycleResult is what one cycle changed.
type CycleResult struct {
	Heads    int
	Admitted []string
	Entries  []scheduler.Entry
}

// Cycle runs one scheduling cycle: pop the heads, decide over a snapshot,
// apply the decisions.
//
// Under waitForPodsReady.blockAdmission a cycle may stop at an entry that
// fits while some admitted workload is not PodsReady (Kueue's scheduler
// sleeps there, in pkg/cache/cache.go WaitForPodsReady). While it is
// stopped, no cycle runs at all: Cycle does nothing until every admitted
// workload is PodsReady (or gone). Then the same cycle goes on: the held
// entry is admitted with the assignment it was given before the wait (not
// if it was deleted or finished meanwhile, which Kueue fails to admit),
// and the walk continues with the rest of that cycle's entries, over the
// cycle's snapshot; the next entry that fits stops the cycle in turn. The
// entries that were not admitted go back to their queues only when the
// walk has ended (pkg/scheduler/scheduler.go schedule, step 6).
func (e *Engine) Cycle(now time.Time) CycleResult {
	e.changes++
	if !e.inRun || len(e.toDrain) > 0 {
		// Rehashed by no run, or changed beyond the cycle's entries
		// (evictions, queues left): the next run hashes everything.
		e.invalidateFingerprint()
	}
	var res CycleResult
	// Kueue drains a stopped ClusterQueue from its workload controller,
	// whether or not the scheduler sleeps.
	// A sharded engine drains only what it decides: a ClusterQueue, or a
	// LocalQueue whose ClusterQueue, is in a tree it owns (one of its
	// trees still held waits for its release); the others' evictions
	// arrive from their owners as facts.
	for _, key := range sortedKeys(e.toDrain) {
		cq, local := key, strings.Contains(key, "/")
		if local {
			cq = ""
			if lq := e.localQueues[key]; lq != nil {
				cq = lq.Spec.ClusterQueue
			}
		}
		switch {
		case e.Owns(cq) && local:
			e.drainLocalQueue(key, now)
		case e.Owns(cq):
			e.drain(cq, now)
		case e.OwnerOf(cq) == e.shard.Index:
			continue
		}
		delete(e.toDrain, key)
	}
	if e.pass != nil {
		if !e.notReady() {
			e.resume(&res, now)
		}
		return res
	}
	if e.blockedBySharding() {
		return res
	}
	var heads []*scheduler.Workload
	if e.Sharded() {
		heads = e.queues.HeadsOf(e.Owns)
	} else {
		heads = e.queues.Heads()
	}
	if len(heads) == 0 {
		return res
	}
	p := scheduler.Begin(e.Snapshot(), heads)
	p.NoPreemption = e.noPreemption
	res.Heads = len(heads)
	e.walk(p, &res, now)
	return res
}

// resume goes on with the cycle that waits for PodsReady: its held entry
// is admitted and the walk continues.
func (e *Engine) resume(res *CycleResult, now time.Time) {
	p := e.pass
	e.pass = nil
	res.Heads = len(p.Entries)
	held := p.Next() - 1
	p.Admit(held)
	e.admitEntry(&p.Entries[held], res, now)
	e.walk(p, res, now)
}

// wake resumes the waiting cycle as soon as an event lets every admitted
// workload be PodsReady or gone, before the next event is applied: Kueue's
// scheduler, asleep in the cycle (pkg/cache/cache.go WaitForPodsReady), is
// woken by the cache change itself. So when one step finishes two
// workloads and the first lifts the block, the cycle goes on while the
// second is still pending. Fresh cycles still wait for RunToQuiescence.
func (e *Engine) wake(now time.Time) {
	if e.pass != nil && !e.notReady() {
		// A cycle outside a run: the next run hashes everything.
		e.invalidateFingerprint()
		var res CycleResult
		e.resume(&res, now)
	}
}

// walk goes on with a cycle until its end, or until blockAdmission holds
// an entry (the cycle is then kept in e.pass).
func (e *Engine) walk(p *scheduler.Pass, res *CycleResult, now time.Time) {
	block := e.podsReady.Enable && e.podsReady.BlockAdmission
	for {
		from := p.Next()
		i := p.Walk()
		to := i
		if i < 0 {
			to = len(p.Entries)
		}
		for j := from; j < to; j++ {
			e.preempt(&p.Entries[j], now)
		}
		if i < 0 {
			break
		}
		en := &p.Entries[i]
		if block && e.notReady() {
			p.Hold(i)
			// Kueue writes a Waiting condition on it: an update.
			if w := e.passWorkload(en); w != nil {
				w.Reason = en.Reason
				w.condPending = false
				e.recordReason(w)
			} else if fw := e.dropFinished(en.Workload.Key); fw != nil {
				fw.condPending = false
				e.updated(fw, now)
			}
			e.pass = p
			res.Entries = append(res.Entries, p.Entries[from:i+1]...)
			return
		}
		p.Admit(i)
		e.admitEntry(en, res, now)
	}
	p.Finish()
	if len(res.Entries) == 0 {
		// The pass is over: its entries change no more, so they are
		// shared rather than copied.
		res.Entries = p.Entries
	} else {
		res.Entries = append(res.Entries, p.Entries...)
	}
	// Kueue's scheduler requeues every entry it did not admit and writes
	// its pending condition (requeueAndUpdate); the workload controller
	// handles the updates those writes make once the cycle is over.
	var updates []*Workload
	for i := range p.Entries {
		en := &p.Entries[i]
		w := e.passWorkload(en)
		if w == nil && en.Outcome != scheduler.Admitted {
			if w := e.requeueFinished(en, now); w != nil {
				updates = append(updates, w)
			}
		}
		if en.Outcome == scheduler.Admitted || w == nil {
			continue
		}
		w.Reason = en.Reason
		w.Info.LastTried = en.Tried
		e.recordReason(w)
		// One rerouted while the cycle waited (its LocalQueue deleted) is
		// not requeued, as Kueue's RequeueWorkload finds no queue.
		if w.queuedIn != "" {
			e.queues.Requeue(&queue.Entry{Workload: w.Info}, en.Requeue, now)
		}
		if !w.condPending {
			w.condPending = true
			e.condWrites++
			updates = append(updates, w)
		}
	}
	for _, w := range updates {
		e.updated(w, now)
	}
}

// updated is what Kueue's workload controller does on an update event of
// a workload that is not admitted (WorkloadReconciler.Update). A finished
// or inactive one leaves its queue, and the parked workloads of its
// LocalQueue's ClusterQueue and cohort are requeued
// (QueueAssociatedInadmissibleWorkloadsAfter).
// A pending one is pushed again as a new queue item (Manager.UpdateWorkload,
// PushOrUpdate), which drops its flavor retry state; if it was parked, it
// stays parked unless its spec differs from the parked copy's. The
// scheduler parks the object as stored, while the controller's copy has
// its limits copied into missing requests (workload.AdjustResources), so
// a workload with such limits goes back to the heap.
func (e *Engine) updated(w *Workload, now time.Time) {
	switch w.Status {
	case Finished, Inactive:
		e.dropFinished(w.Info.Key)
		if lq := e.localQueues[api.NamespacedName(w.Object.Namespace, w.Object.Spec.QueueName)]; lq != nil {
			e.queues.QueueInadmissible(lq.Spec.ClusterQueue, now)
		}
	case Pending:
		if w.queuedIn == "" {
			return
		}
		w.Info.LastTried = nil
		if w.adjusted {
			e.queues.Push(&queue.Entry{Workload: w.Info}, true, now)
		}
	}
}

// limitsWithoutRequests reports whether some container of the workload
// has a limit for a resource it does not request: Kueue's
// workload.AdjustResources (handleLimitsToRequests) then changes the
// spec it hands the queues on every update event.
func limitsWithoutRequests(wl *api.Workload) bool {
	for i := range wl.Spec.PodSets {
		spec := &wl.Spec.PodSets[i].Template.Spec
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for j := range cs {
				for r := range cs[j].Resources.Limits {
					if _, ok := cs[j].Resources.Requests[r]; !ok {
						return true
					}
				}
			}
		}
	}
	return false
}

// passWorkload is the workload of a cycle's entry if it is still pending;
// nil once it was deleted, finished or admitted by another way while the
// cycle waited.
func (e *Engine) passWorkload(en *scheduler.Entry) *Workload {
	w := e.workloads[en.Workload.Key]
	if w == nil || w.Status != Pending {
		return nil
	}
	return w
}

// admitEntry applies an admitted entry. A workload deleted or finished
// while the cycle waited is not admitted, as Kueue's admission write
// fails; one whose ClusterQueue was deleted meanwhile goes back to its
// queue at the end of the cycle, as Kueue's cache refuses to assume it.
func (e *Engine) admitEntry(en *scheduler.Entry, res *CycleResult, now time.Time) {
	w := e.passWorkload(en)
	if w == nil {
		// A finished or inactive workload still queued: Kueue's
		// scheduler reserves its quota all the same, and the admission's
		// status write is an update on which the workload controller
		// drops it and gives the quota back (see updated). It counts as
		// an admission.
		if fw := e.dropFinished(en.Workload.Key); fw != nil {
			res.Admitted = append(res.Admitted, fw.Info.Key)
			if a := fw.Object.Spec.Active; a != nil && !*a {
				// The admission set its Evicted condition false; the
				// workload controller, which looks at spec.active before
				// anything else, evicts it again (InactiveWorkload),
				// finished or not. Only that eviction is published: the
				// log never held the quota.
				e.evictions = append(e.evictions, Eviction{Key: fw.Info.Key, Reason: EvictedByDeactivation, At: now})
				e.record(Decision{Kind: DecidedEviction, Key: fw.Info.Key, EvictionReason: EvictedByDeactivation})
			}
			e.admittedUnqueued(fw, en.Workload.ClusterQueue, now)
		}
		return
	}
	if e.clusterQueues[en.Workload.ClusterQueue] == nil {
		en.Outcome = scheduler.NotAdmitted
		en.Requeue = scheduler.RequeueGeneric
		en.Reason = &scheduler.Reason{Token: scheduler.ClusterQueueNotFound,
			Message: fmt.Sprintf("ClusterQueue %s not found", en.Workload.ClusterQueue)}
		return
	}
	if w.queuedIn != "" {
		// Put back in its queue by a change while the cycle waited.
		e.queues.Delete(w.queuedIn, w.Info.Key)
	}
	e.admit(w, en.Admission(), now)
	res.Admitted = append(res.Admitted, w.Info.Key)
	e.record(Decision{Kind: DecidedAdmission, Key: w.Info.Key, Admission: w.Admission})
	// Only a cycle woken after its ClusterQueue was set to HoldAndDrain
	// admits there; Kueue's workload reconcile then evicts it.
	if e.draining(w.Admission.ClusterQueue) {
		e.stop(w, now)
	}
}

// preempt issues an entry's preemptions. Already-evicted targets are only
// counted, as in Kueue.
func (e *Engine) preempt(en *scheduler.Entry, now time.Time) {
	w := e.passWorkload(en)
	var evicted []scheduler.Target
	for _, t := range en.Targets {
		if e.noPreemption {
			break
		}
		v := e.workloads[t.Workload.Key]
		if v == nil {
			continue
		}
		ev := Eviction{Reason: EvictedByPreemption, Preemptor: t.Preemptor, PreemptorCQ: t.PreemptorCQ, Kind: t.Kind}
		if v.Status == Admitted {
			e.evict(v, ev, now)
		} else {
			e.reissued(v, ev, now)
		}
		evicted = append(evicted, t)
	}
	if len(evicted) > 0 && w != nil {
		e.record(Decision{Kind: DecidedPreemption, Key: w.Info.Key, Targets: evicted})
	}
}

// reissued is a preemption of a target that lost its quota while the
// cycle that chose it waited for PodsReady (it timed out, was deactivated
// or finished). Kueue's preemptor checks the Evicted condition of the
// target as the cycle's snapshot holds it, so it evicts it again, and
// writes the snapshot's copy of its status, admission and all
// (preemption.go IssuePreemptions, applyPreemption): the workload holds
// quota for a moment, loses the requeue state of its timeout, and its
// eviction is now a preemption. The job controller clears the
// reservation at once, which requeues the parked workloads of its
// cohort; a timed-out workload is queued at once, by its creation time,
// until the timer its timeout armed pushes the copy it kept then
// (see ApplyRequeue).
func (e *Engine) reissued(v *Workload, ev Eviction, now time.Time) {
	ev.Key, ev.At = v.Info.Key, now
	e.evictions = append(e.evictions, ev)
	v.Evictions++
	e.applyReissue(v, now)
}

// applyReissue is what a reissued preemption leaves (see reissued).
func (e *Engine) applyReissue(v *Workload, now time.Time) {
	if lq := e.localQueues[api.NamespacedName(v.Object.Namespace, v.Object.Spec.QueueName)]; lq != nil {
		e.queues.QueueInadmissible(lq.Spec.ClusterQueue, now)
	}
	if v.Status != Pending || !v.timedOut {
		return
	}
	v.timedOut = false
	v.RequeueCount = 0
	if !v.RequeueAt.IsZero() {
		// Still in its backoff: the timeout's timer still fires.
		stale := *v.Info
		if v.evictedPriority != nil {
			stale.Priority = *v.evictedPriority
		}
		v.stale, v.staleAt = &stale, v.RequeueAt
	}
	v.RequeueAt, v.evictedPriority, v.backoffUpdated, v.evictedUnset = time.Time{}, nil, false, false
	info := *v.Info
	info.QueueTime, info.LastTried = info.Created, nil
	if v.queuedIn != "" {
		e.queues.Delete(v.queuedIn, v.Info.Key)
	}
	v.Info = &info
	v.condPending = true
	e.route(v, now)
}

// inPass reports whether a workload is one of the heads of a cycle that
// waits for PodsReady: it is out of its queue until the cycle ends.
func (e *Engine) inPass(w *Workload) bool {
	if e.pass == nil {
		return false
	}
	for i := range e.pass.Entries {
		if e.pass.Entries[i].Workload.Key == w.Info.Key {
			return true
		}
	}
	return false
}

// passMark identifies a waiting cycle in the quiescence fingerprint: the
// state goes on to change when it resumes even if no workload does.
func (e *Engine) passMark() uint64 {
	if e.pass == nil {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte("pass\x00"))
	h.Write([]byte(e.pass.Entries[e.pass.Next()-1].Workload.Key))
	return h.Sum64()
}

func (e *Engine) admit(w *Workload, ad scheduler.Admission, now time.Time) {
	st := e.state(ad.ClusterQueue)
	st.admitted[w.Info.Key] = w
	st.total.Add(ad.Usage)
	e.chargeLocalQueue(w, ad.Usage, false)
	// Kueue's cache takes the admitted workload's status update (the
	// reservation written) as a delete and an add of the copy the
	// scheduler assumed (Cache.AddOrUpdateWorkload), and the delete grows
	// the queue's AllocatableResourceGeneration: a pending workload of the
	// queue or its cohort that tried some flavors starts over at its next
	// attempt, as after a release.
	st.generation++
	if c := e.clusterQueues[ad.ClusterQueue]; e.cohortGens != nil && c != nil && c.Spec.Cohort != "" && e.inactive[ad.ClusterQueue] == "" {
		// The cached sum of the cohort's active members (cohortGeneration)
		// grows with it, rather than all sums being counted again.
		e.cohortGens[c.Spec.Cohort]++
	}
	if !slices.Contains(e.releasedIn, ad.ClusterQueue) {
		e.releasedIn = append(e.releasedIn, ad.ClusterQueue)
	}
	e.snapUsageChanged(ad.ClusterQueue, st)
	w.queuedIn = ""
	e.setStatus(w, Admitted)
	w.Admission = e.shared(ad)
	w.AdmittedAt = now
	w.Reason = nil
	w.condPending = false
	w.timedOut = false
	w.PodsReady = false
	w.Info.LastTried = nil
	w.Info.ForgetRequests()
	e.admissionSeq++
	w.admissionSeq = e.admissionSeq
	e.timerSeq++
	w.timerSeq = e.timerSeq
	w.record = admittedRecord(w)
	e.snapAdmitted(ad.ClusterQueue, w.record, true)
	e.admittedHash += e.hashAdmitted(w)
}

// hashAdmitted identifies a workload's admission for oscillation checks.
func (e *Engine) hashAdmitted(w *Workload) uint64 {
	h := fnvByte(fnvString(fnvOffset, w.Info.Key), 0)
	h = fnvString(h, w.Admission.ClusterQueue)
	cells := e.cellBuf[:0]
	for fr := range w.Admission.Usage {
		cells = append(cells, fr)
	}
	slices.SortFunc(cells, quota.FlavorResource.Compare)
	for _, fr := range cells {
		h = fnvString(fnvString(fnvByte(h, 0), fr.Flavor), string(fr.Resource))
	}
	e.cellBuf = cells
	return h
}

// notReady reports whether some admitted workload waits for PodsReady.
func (e *Engine) notReady() bool {
	if !e.podsReady.Enable {
		return false
	}
	for _, st := range e.usage {
		for _, w := range st.admitted {
			if !w.PodsReady {
				return true
			}
		}
	}
	return false
}

func admittedRecord(w *Workload) *scheduler.AdmittedWorkload {
	r := &scheduler.AdmittedWorkload{Key: w.Info.Key, UID: w.Info.UID, ClusterQueue: w.Admission.ClusterQueue,
		Priority: w.Info.Priority, QueueTime: w.Info.Created, AdmittedAt: w.AdmittedAt, AdmissionSeq: w.admissionSeq,
		Usage: w.Admission.Usage}
	if len(w.Admission.PodSets) > 1 {
		for _, ps := range w.Admission.PodSets {
			u := quota.Usage{}
			for res, f := range ps.Flavors {
				u[quota.FlavorResource{Flavor: f, Resource: res}] += ps.Usage[res]
			}
			r.PodSets = append(r.PodSets, u)
		}
	}
	return r
}

// evict takes a workload's quota away and sends it back to its queue. A
// preempted workload keeps its creation time as its place in the queue.
func (e *Engine) evict(w *Workload, ev Eviction, now time.Time) {
	e.release(w, now)
	e.setStatus(w, Pending)
	w.Evictions++
	w.Info.LastTried = nil
	w.Info.QueueTime = w.Info.Created
	ev.Key, ev.At = w.Info.Key, now
	e.evictions = append(e.evictions, ev)
	e.route(w, now)
}

// MaxCycles bounds RunToQuiescence; reaching it means a bug, not a load.
const MaxCycles = 1_000_000

// RunToQuiescence repeats cycles until nothing is admitted or evicted and
// the queues with every pending workload's retry state are back in a state
// seen since the last admission or eviction (FORMAT.md: a retry state may
// cycle with period two or more). It returns the number of cycles run.
//
// The state is fingerprinted as a sum of per-workload hashes, so that a
// cycle only rehashes what it touched: its heads, its victims, its
// admissions, and the parked workloads its evictions sent back to their
// queues. The sum is kept from run to run: a run starts from the last
// one's, with the shares of what changed since rehashed (see
// startFingerprint), so that a decision under a backlog does not hash
// the whole backlog.
//
// Admissions and evictions can chase each other forever (kueue#6947's
// preempt/re-admit ping-pong, which Kueue v0.6 never leaves); whole
// states, admitted workloads included, are therefore remembered too. A
// whole state seen again proves such a loop: the run goes on without
// preemption, admitting what fits and parking the rest, until it is
// quiescent. Merely stopping at the repeat could stop right after an
// eviction, with the evicted workload and its preemptor both pending
// while their quota is free. A run ends in a settled state: if nothing
// has changed since the last run ended, another run changes nothing, so
// that a service deciding run after run (while evictions it asked for
// arrive) cannot replay the ping-pong the last run cut short.
func (e *Engine) RunToQuiescence(now time.Time) int {
	if e.settled && e.changes == e.settledAt {
		return 0
	}
	var fp uint64
	e.inRun = true
	defer func() {
		e.settled, e.settledAt, e.cutLoop, e.noPreemption = true, e.changes, e.noPreemption, false
		e.inRun, e.fpSum = false, fp
	}()
	fp = e.startFingerprint()
	if checkStats != nil {
		checkStats(e)
	}
	// The states seen are those after each cycle since the last admission
	// or eviction, as the oracle counts them: not the state the run
	// starts from, nor the one an admission or eviction left.
	seen := map[uint64]bool{}
	whole := map[uint64]bool{(fp + e.passMark()) ^ e.admittedHash: true}
	for n := 1; n <= MaxCycles; n++ {
		evictions := len(e.evictions)
		res := e.Cycle(now)
		if e.onCycle != nil && res.Heads > 0 {
			e.onCycle(res)
		}
		if res.Heads == 0 && len(e.evictions) == evictions {
			// No head, or the cycle waits for PodsReady.
			return n
		}
		for i := range res.Entries {
			en := &res.Entries[i]
			for _, t := range en.Targets {
				fp = e.rehash(fp, t.Workload.Key)
			}
			fp = e.rehash(fp, en.Workload.Key)
		}
		for _, k := range res.Admitted {
			fp = e.rehash(fp, k)
		}
		for _, k := range e.queues.DrainUnparked() {
			fp = e.rehash(fp, k)
		}
		if len(e.releasedIn) > 0 {
			// Released quota, or an admission, may have outdated retry
			// states (both grow a generation). Only a share hashed with a
			// retry state can change (one hashed without it stays so,
			// since generations only grow within a run), and only in the
			// cohort, or the queue alone, whose generation grew.
			var groups []string
			for _, cq := range e.releasedIn {
				if g := e.triedGroup(cq); !slices.Contains(groups, g) {
					groups = append(groups, g)
				}
			}
			for _, g := range groups {
				for k, w := range e.triedHashed[g] {
					if w.Status == Pending && w.Info.LastTried != nil {
						fp = e.rehash(fp, k)
					} else {
						// Its share may be outdated too: the next run
						// starts with it right (see startFingerprint).
						e.touch(w)
					}
				}
			}
		}
		e.releasedIn = e.releasedIn[:0]
		if e.afterCycle != nil {
			e.afterCycle(fp)
		}
		// A cycle waiting for PodsReady is part of the state.
		st := fp + e.passMark()
		if len(res.Admitted) > 0 || len(e.evictions) > evictions {
			if !e.noPreemption && whole[st^e.admittedHash] {
				e.noPreemption = true
			}
			whole[st^e.admittedHash] = true
			clear(seen)
			continue
		}
		if seen[st] {
			return n
		}
		seen[st] = true
	}
	return MaxCycles
}

// RunToRest runs to quiescence, and again for as long as a run wrote a
// workload's first Pending condition. That write is an update Kueue's
// workload controller handles by requeueing the workload without its
// retry state (see updated), so a workload's first attempt leaves the
// fingerprint as it found it and can end a run on a repeated state while
// its next attempt would go on to the next flavor and fit: FORMAT.md's
// rule stops there (the oracle and the simulator settle again at the next
// step), but Kueue's scheduler never stops, and a service that stopped
// there would leave the workload pending with its quota free until some
// unrelated event. A run that writes no first condition ends at rest.
// The admission service and the models of it (what-if, history, ETA,
// explain) call this; the simulator keeps the scenario rule (Settle).
func (e *Engine) RunToRest(now time.Time) int {
	writes := e.condWrites
	n := e.RunToQuiescence(now)
	for e.condWrites != writes && !e.cutLoop && n < MaxCycles {
		writes = e.condWrites
		n += e.Settle(now)
	}
	return n
}

// Settle runs to quiescence even when nothing changed since the last run
// ended, as the oracle settles again before each expect and at the end of
// a scenario (and on both sides of an advance): a run ends at a repeated
// state, but not every condition of a workload is part of that state (see
// condPending), so the next run may go on. The simulator settles this
// way; a service calls RunToQuiescence. Settle never restarts a loop the
// last run cut short.
func (e *Engine) Settle(now time.Time) int {
	if !e.cutLoop {
		e.settled = false
	}
	return e.RunToQuiescence(now)
}

// requeueFinished decides the fate of a cycle's entry whose workload
// finished (without being deleted) while the cycle waited, or of a
// finished workload still queued that was not admitted. Kueue's scheduler
// requeues every entry it did not admit, and RequeueWorkload refuses only
// a workload that is gone or holds quota (pkg/queue/manager.go): a
// finished one goes back to its queue. The scheduler then writes the
// entry's pending condition (requeueAndUpdate,
// UnsetQuotaReservationWithCondition); if that is an update event (see
// condPending), the workload controller drops it (WorkloadReconciler.Update,
// status finished): requeueFinished returns it for updated. Otherwise
// Kueue v0.6.3 under the oracle keeps popping it whatever its later
// messages; it leaves the queue when it is deleted, when its spec is
// updated, or when it fits (the admission write). Until then it is tried
// like any head and can hold a StrictFIFO queue back.
func (e *Engine) requeueFinished(en *scheduler.Entry, now time.Time) (update *Workload) {
	listed := e.finishedQueued[en.Workload.Key] != nil && e.workloads[en.Workload.Key].listed
	w := e.dropFinished(en.Workload.Key)
	if w == nil {
		return nil
	}
	if cq, why := e.target(w.Object); why == nil {
		w.listed = listed
		w.Info.ClusterQueue = cq
		w.Info.LastTried = en.Tried
		w.queuedIn = cq
		e.finishedQueued[w.Info.Key] = w
		e.queues.Requeue(&queue.Entry{Workload: w.Info}, en.Requeue, now)
	}
	if w.condPending {
		return nil
	}
	w.condPending = true
	e.condWrites++
	return w
}

// admittedUnqueued settles a finished or inactive workload, out of its
// queue, that Kueue's scheduler admitted to cq: a finished one keeps the
// admission in its status, as finishing an admitted workload does; an
// inactive one is evicted and its reservation cleared with a Pending
// condition. The admission's write is an update (see updated).
func (e *Engine) admittedUnqueued(w *Workload, cq string, now time.Time) {
	if w.Status == Finished {
		w.finishedIn = cq
	} else {
		w.condPending = true
	}
	e.updated(w, now)
}

// dropFinished takes a finished or inactive workload out of its queue,
// if it is queued, and returns it; nil for any other workload. Kueue's
// queues hold either kind alike (see Workload.listed).
func (e *Engine) dropFinished(key string) *Workload {
	w := e.workloads[key]
	if w == nil || w.Status != Finished && w.Status != Inactive {
		return nil
	}
	if w.queuedIn != "" {
		e.queues.Delete(w.queuedIn, key)
		w.queuedIn = ""
	}
	delete(e.finishedQueued, key)
	w.listed = false
	return w
}
