package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/jetqueue/jetqueue/libs/podsready"
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
}

// NextTimer returns when the next timer is due. A service sleeps until
// then; the simulator fires timers at their own instants.
func (e *Engine) NextTimer() (time.Time, bool) {
	var next time.Time
	e.timed(func(w *Workload) {
		if t, ok := e.timerOf(w); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
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

func (e *Engine) timerOf(w *Workload) (time.Time, bool) {
	switch {
	case e.podsReady.Enable && w.Status == Admitted && !w.PodsReady:
		return e.podsReady.Deadline(w.AdmittedAt), true
	case e.waitingBackoff(w):
		return w.RequeueAt, true
	}
	return time.Time{}, false
}

// waitingBackoff reports whether a workload sits out a requeue backoff.
func (e *Engine) waitingBackoff(w *Workload) bool {
	return w.Status == Pending && w.queuedIn == "" && !w.RequeueAt.IsZero()
}

// DueTimers returns every timer due at or before now, in time order (then
// key order), each decided as if it fired at now. It changes nothing: the
// podsready service publishes them, and FireTimers applies them.
func (e *Engine) DueTimers(now time.Time) []Timer {
	var due []Timer
	e.timed(func(w *Workload) {
		at, ok := e.timerOf(w)
		if !ok || at.After(now) {
			return
		}
		t := Timer{Key: w.Info.Key, At: at, RequeueCount: w.RequeueCount}
		if w.Status == Admitted {
			d := e.podsReady.OnTimeout(w.RequeueCount, now)
			t.Timeout = &d
		}
		due = append(due, t)
	})
	slices.SortFunc(due, func(a, b Timer) int {
		if c := a.At.Compare(b.At); c != 0 {
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
	if e.podsReady.ByEviction {
		w.Info.QueueTime = now
	}
	e.evictions = append(e.evictions, Eviction{Key: key, Reason: EvictedByPodsReadyTimeout, At: now})
	e.wake(now)
	return true
}

// ApplyDeactivation deactivates an admitted workload whose requeues are
// used up.
func (e *Engine) ApplyDeactivation(key string, now time.Time) bool {
	e.changes++
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
	e.release(w, now)
	w.Evictions++
	w.Info.LastTried = nil
	return w
}

// ApplyRequeue returns a workload whose backoff ended to its queue. It
// does nothing unless the workload is waiting out a backoff.
func (e *Engine) ApplyRequeue(key string, now time.Time) bool {
	e.changes++
	w := e.workloads[key]
	if w == nil || !e.waitingBackoff(w) {
		return false
	}
	w.RequeueAt = time.Time{}
	e.route(w, now)
	return true
}
