package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/jetqueue/jetqueue/libs/podsready"
	"github.com/jetqueue/jetqueue/libs/queue"
)

// ErrNotAdmitted is returned for PodsReady on a workload without quota.
var ErrNotAdmitted = fmt.Errorf("holds no quota")

// PodsReady records that an admitted workload's pods are all ready, which
// stops its timeout and may lift blockAdmission.
func (e *Engine) PodsReady(key string) error {
	e.changes++
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	if w.Status != Admitted {
		return fmt.Errorf("workload %s: %w", key, ErrNotAdmitted)
	}
	w.PodsReady = true
	return nil
}

// Timer is one timer due: an admitted workload's PodsReady timeout, with
// what KEP-349 does about it, or the end of a pending workload's backoff.
type Timer struct {
	Key string
	At  time.Time
	// Timeout is set for a PodsReady timeout.
	Timeout *podsready.Timeout
	// RequeueCount is how often the workload timed out before.
	RequeueCount int32
	seq          uint64
}

// NextTimer returns when the next timer is due. A service sleeps until
// then; the simulator fires timers at their own instants.
func (e *Engine) NextTimer() (time.Time, bool) {
	var next time.Time
	e.timed(func(w *Workload) {
		e.timersOf(w, func(t time.Time, _ bool) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		})
	})
	return next, !next.IsZero()
}

// timed calls f with every workload that may have a timer: the pending
// ones (a backoff), and the admitted ones when PodsReady is awaited.
// Finished and inactive workloads, most of a long history, have none.
func (e *Engine) timed(f func(*Workload)) {
	for _, w := range e.pending {
		f(w)
	}
	if !e.podsReady.Enable {
		return
	}
	for _, st := range e.usage {
		for _, w := range st.admitted {
			f(w)
		}
	}
}

// timersOf calls f with each timer a workload has, and whether it is a
// PodsReady timeout: that timeout while it is admitted and not ready, the
// end of its backoff, and the push of the copy a reissued preemption left
// (see reissued), which is due whatever the workload became since.
func (e *Engine) timersOf(w *Workload, f func(at time.Time, timeout bool)) {
	switch {
	case e.podsReady.Enable && w.Status == Admitted && !w.PodsReady:
		f(e.podsReady.Deadline(w.AdmittedAt), true)
	case e.waitingBackoff(w):
		f(w.RequeueAt, false)
	}
	if !w.staleAt.IsZero() {
		f(w.staleAt, false)
	}
}

// waitingBackoff reports whether a workload sits out a requeue backoff.
func (e *Engine) waitingBackoff(w *Workload) bool {
	return w.Status == Pending && w.queuedIn == "" && !w.RequeueAt.IsZero()
}

// DueTimers returns every timer due at or before now, in time order, each
// decided as if it fired at now. Timers of one instant come in the order
// they were armed (a PodsReady timeout at admission, the end of a backoff
// at the eviction), as Kueue's controllers set them up one after another;
// then in key order. It changes nothing: the podsready service publishes
// them, and FireTimers applies them.
func (e *Engine) DueTimers(now time.Time) []Timer {
	var due []Timer
	e.timed(func(w *Workload) {
		e.timersOf(w, func(at time.Time, timeout bool) {
			if at.After(now) {
				return
			}
			t := Timer{Key: w.Info.Key, At: at, RequeueCount: w.RequeueCount, seq: w.timerSeq}
			if timeout {
				d := e.podsReady.OnTimeout(w.RequeueCount, now)
				t.Timeout = &d
			}
			due = append(due, t)
		})
	})
	slices.SortFunc(due, func(a, b Timer) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return due
}

// FireTimers runs every timer due at or before now: timed-out workloads
// are evicted or deactivated, workloads whose backoff ended go back to
// their queue.
func (e *Engine) FireTimers(now time.Time) {
	for _, t := range e.DueTimers(now) {
		switch {
		case t.Timeout == nil:
			e.ApplyRequeue(t.Key, now)
		case t.Timeout.Deactivate:
			e.ApplyDeactivation(t.Key, now)
		default:
			e.ApplyTimeout(t.Key, t.Timeout.Count, t.Timeout.RequeueAt, now)
		}
	}
}

// ApplyTimeout evicts an admitted workload that did not become PodsReady
// in time; it waits out its backoff until requeueAt (KEP-349). It does
// nothing to a workload that holds no quota.
func (e *Engine) ApplyTimeout(key string, count int32, requeueAt, now time.Time) bool {
	e.changes++
	w := e.timedOut(key, now)
	if w == nil {
		return false
	}
	e.setStatus(w, Pending)
	w.RequeueCount, w.RequeueAt = count, requeueAt
	w.timedOut = true
	p := w.Info.Priority
	w.evictedPriority = &p
	e.timerSeq++
	w.timerSeq = e.timerSeq
	if e.podsReady.ByEviction {
		// Workloads evicted at the same instant queue in eviction order,
		// after those created then: Kueue orders them by the Evicted
		// condition's time, which the oracle keeps apart by a nanosecond
		// per transition.
		if !now.Equal(e.evictedAt) {
			e.evictedAt, e.evictedTick = now, 0
		}
		e.evictedTick++
		w.Info.QueueTime = now.Add(e.evictedTick)
	}
	e.evictions = append(e.evictions, Eviction{Key: key, Reason: EvictedByPodsReadyTimeout, At: now})
	e.wake(now)
	return true
}

// ApplyDeactivation deactivates an admitted workload whose requeues are
// used up. Applied to an inactive workload, finished or not, it is the
// eviction that follows the admission of one still queued (see
// admitEntry), read back by an engine that did not decide it: it leaves
// its queue as it did in the deciding engine.
func (e *Engine) ApplyDeactivation(key string, now time.Time) bool {
	e.changes++
	if w := e.workloads[key]; w != nil && (w.Status == Inactive || w.Status == Finished) {
		e.touch(w)
		cq := w.queuedIn
		if e.dropFinished(key) != nil && (cq != "" || w.Status == Inactive) {
			e.admittedUnqueued(w, cq, now)
		}
		e.wake(now)
		return true
	}
	w := e.timedOut(key, now)
	if w == nil {
		return false
	}
	e.setStatus(w, Inactive)
	w.RequeueCount, w.RequeueAt = 0, time.Time{}
	e.evictions = append(e.evictions, Eviction{Key: key, Reason: EvictedByDeactivation, At: now})
	e.wake(now)
	return true
}

func (e *Engine) timedOut(key string, now time.Time) *Workload {
	w := e.workloads[key]
	if w == nil || w.Status != Admitted {
		return nil
	}
	e.touch(w)
	e.release(w, now)
	w.Evictions++
	w.Info.LastTried = nil
	return w
}

// ApplyRequeue returns a workload whose backoff ended to its queue. It
// does nothing unless the workload is waiting out a backoff.
//
// It is queued as it was when it was evicted: Kueue's workload controller
// requeues, when the backoff ends, the copy of the workload it took from
// the eviction's update event (WorkloadReconciler.Update, the
// time.AfterFunc of case quotaReserved/admitted to pending, through
// Manager.AddOrUpdateWorkload and PushOrUpdate, which replaces a newer
// version parked meanwhile). So a priority set during the backoff is not
// the one it is queued with; the workload gets it back the first time it
// is popped and requeued (Manager.RequeueWorkload reads the newest
// object), or when it is updated again. A priority changed during the
// backoff and set back to the eviction's leaves the copy equal to the
// parked version, which PushOrUpdate updates in place: the workload stays
// parked.
//
// It also carries out the push a reissued preemption left (see reissued):
// when it is due, the copy kept at the timeout replaces the workload's
// queue item, as Kueue's timer pushes it (PushOrUpdate), if the workload
// is pending then.
func (e *Engine) ApplyRequeue(key string, now time.Time) bool {
	e.changes++
	w := e.workloads[key]
	if w != nil {
		e.touch(w)
	}
	if w != nil && !w.staleAt.IsZero() && !now.Before(w.staleAt) {
		stale := *w.stale
		w.stale, w.staleAt = nil, time.Time{}
		if w.Status != Pending || w.queuedIn == "" {
			return false
		}
		stale.ClusterQueue, stale.LastTried = w.Info.ClusterQueue, nil
		e.queues.Delete(w.queuedIn, key)
		e.queues.Push(&queue.Entry{Workload: &stale}, true, now)
		return true
	}
	if w == nil || !e.waitingBackoff(w) {
		return false
	}
	w.RequeueAt = time.Time{}
	p, updated := w.evictedPriority, w.backoffUpdated && !w.evictedUnset
	w.evictedPriority, w.backoffUpdated, w.evictedUnset = nil, false, false
	e.route(w, now)
	switch {
	case w.queuedIn == "":
	case p != nil && *p != w.Info.Priority:
		stale := *w.Info
		stale.Priority = *p
		e.queues.Delete(w.queuedIn, key)
		e.queues.Push(&queue.Entry{Workload: &stale}, true, now)
	case updated:
		// Its priority changed during the backoff and is back at the
		// evicted version's (set in both: an unset priority differs from
		// 0 in the spec Kueue compares): the update parked the newer version (PushOrUpdate
		// while the backoff had not expired), and the eviction's copy,
		// equal to it, replaces it in place, still parked, until
		// something requeues the cohort's parked workloads.
		e.queues.Delete(w.queuedIn, key)
		e.queues.Park(&queue.Entry{Workload: w.Info})
	}
	return true
}
