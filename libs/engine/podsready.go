package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// ErrNotAdmitted is returned for PodsReady on a workload without quota.
var ErrNotAdmitted = fmt.Errorf("holds no quota")

// PodsReady records that an admitted workload's pods are all ready, which
// stops its timeout and may lift blockAdmission.
func (e *Engine) PodsReady(key string) error {
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

// NextTimer returns when the next timer is due: a PodsReady timeout of an
// admitted workload, or the end of a requeue backoff. A service sleeps
// until then; the simulator fires timers at their own instants.
func (e *Engine) NextTimer() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, w := range e.workloads {
		switch {
		case e.podsReady.Enable && w.Status == Admitted && !w.PodsReady:
			consider(e.podsReady.Deadline(w.AdmittedAt))
		case e.waitingBackoff(w):
			consider(w.RequeueAt)
		}
	}
	return next, !next.IsZero()
}

// waitingBackoff reports whether a workload sits out a requeue backoff.
func (e *Engine) waitingBackoff(w *Workload) bool {
	return w.Status == Pending && w.queuedIn == "" && !w.RequeueAt.IsZero() && (e.pinned == nil || e.pinned.w != w)
}

// FireTimers runs every timer due at or before now, in time order (then
// key order): timed-out workloads are evicted or deactivated, workloads
// whose backoff ended go back to their queue.
func (e *Engine) FireTimers(now time.Time) {
	type timer struct {
		at time.Time
		w  *Workload
	}
	var due []timer
	for _, w := range e.workloads {
		switch {
		case e.podsReady.Enable && w.Status == Admitted && !w.PodsReady:
			if d := e.podsReady.Deadline(w.AdmittedAt); !d.After(now) {
				due = append(due, timer{d, w})
			}
		case e.waitingBackoff(w) && !w.RequeueAt.After(now):
			due = append(due, timer{w.RequeueAt, w})
		}
	}
	slices.SortFunc(due, func(a, b timer) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.w.Info.Key, b.w.Info.Key)
	})
	for _, t := range due {
		if t.w.Status == Admitted {
			e.timeout(t.w, now)
		} else {
			t.w.RequeueAt = time.Time{}
			e.route(t.w, now)
		}
	}
}

// timeout evicts a workload that did not become PodsReady in time, or
// deactivates it once its requeues are used up (KEP-349).
func (e *Engine) timeout(w *Workload, now time.Time) {
	d := e.podsReady.OnTimeout(w.RequeueCount, now)
	e.release(w, now)
	w.Evictions++
	w.Info.LastTried = nil
	if d.Deactivate {
		e.setStatus(w, Inactive)
		w.RequeueCount, w.RequeueAt = 0, time.Time{}
		e.evictions = append(e.evictions, Eviction{Key: w.Info.Key, Reason: EvictedByDeactivation, At: now})
		return
	}
	e.setStatus(w, Pending)
	w.RequeueCount, w.RequeueAt = d.Count, d.RequeueAt
	if e.podsReady.ByEviction {
		w.Info.QueueTime = now
	}
	e.evictions = append(e.evictions, Eviction{Key: w.Info.Key, Reason: EvictedByPodsReadyTimeout, At: now})
}
