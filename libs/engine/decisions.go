package engine

import (
	"fmt"
	"time"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Decision is one outcome of scheduling that a service publishes: an
// admission, a new reason for a pending workload, or a preemption. A
// preemption's Targets are the victims it evicted: the engine applies the
// evictions at once, as Kueue's cache does, and the preemptor service
// publishes them.
type Decision struct {
	Kind      DecisionKind
	Key       string
	Admission *scheduler.Admission
	Reason    *scheduler.Reason
	Targets   []scheduler.Target
	// EvictionReason is an eviction's reason (DecidedEviction).
	EvictionReason string
}

// DecisionKind tells decisions apart.
type DecisionKind string

const (
	DecidedAdmission    DecisionKind = "QuotaReserved"
	DecidedInadmissible DecisionKind = "Inadmissible"
	DecidedPreemption   DecisionKind = "PreemptionRequested"
	// DecidedEviction is an eviction the engine decides itself (a
	// HoldAndDrain ClusterQueue's workloads), published by the service
	// that runs it.
	DecidedEviction DecisionKind = "Evicted"
)

// RecordDecisions makes the engine keep every decision for DrainDecisions;
// the simulator does not need them, services do.
func (e *Engine) RecordDecisions() { e.recording = true }

// DrainDecisions returns the decisions made since the last call, in order.
func (e *Engine) DrainDecisions() []Decision {
	out := e.decisions
	e.decisions = nil
	return out
}

// Undrained is the decisions made since the last DrainDecisions, which
// the caller must not change: a service notes what it knew when each was
// made (see the admission service's fences).
func (e *Engine) Undrained() []Decision { return e.decisions }

func (e *Engine) record(d Decision) {
	if e.recording {
		e.decisions = append(e.decisions, d)
	}
}

// recordReason records a pending workload's reason when its token or
// message changed since the last one recorded: reasons are published only
// when they change.
func (e *Engine) recordReason(w *Workload) {
	if !e.recording || w.Reason == nil {
		return
	}
	if p := w.publishedReason; p != nil && p.Token == w.Reason.Token && p.Message == w.Reason.Message {
		return
	}
	r := *w.Reason
	w.publishedReason = &r
	e.record(Decision{Kind: DecidedInadmissible, Key: w.Info.Key, Reason: &r})
}

// ApplyAdmission applies an admission decided elsewhere (read back from the
// event log): the workload takes its quota without a new decision. It does
// nothing for a workload that is no longer pending, as when a later event
// deleted or finished it first.
func (e *Engine) ApplyAdmission(key string, ad scheduler.Admission, at time.Time) bool {
	e.changes++
	w := e.workloads[key]
	if w == nil || w.Status != Pending {
		return false
	}
	e.touch(w)
	if w.queuedIn != "" {
		e.queues.Delete(w.queuedIn, key)
	}
	ad.Usage = ad.TotalUsage()
	e.admit(w, ad, at)
	return true
}

// Unadmit takes back an admission that could not be published (another
// writer changed the workload first): the workload returns to its queue
// and is decided again.
func (e *Engine) Unadmit(key string, now time.Time) error {
	e.changes++
	w := e.workloads[key]
	if w == nil || w.Status != Admitted {
		return fmt.Errorf("workload %s: %w", key, ErrNotAdmitted)
	}
	e.touch(w)
	e.release(w, now)
	e.setStatus(w, Pending)
	e.route(w, now)
	return nil
}

// ApplyEviction applies an eviction read back from the event log to a
// workload that still holds quota; the workload returns to its queue. A
// preemption of a workload that timed out waiting for PodsReady since it
// was chosen is applied as Kueue's reissued one is (see reissued); the
// engine that decided it applied it already.
func (e *Engine) ApplyEviction(key string, ev Eviction, now time.Time) bool {
	e.changes++
	w := e.workloads[key]
	if w != nil {
		e.touch(w)
	}
	if w != nil && w.Status == Pending && w.timedOut && ev.Reason == EvictedByPreemption {
		e.applyReissue(w, now)
		return true
	}
	if w == nil || w.Status != Admitted {
		return false
	}
	e.evict(w, ev, now)
	e.evictions = e.evictions[:len(e.evictions)-1]
	return true
}

// NoteReason records a reason read back from the log as already
// published, so a new leader does not publish it again; it is also the
// condition the workload carries (see condPending).
func (e *Engine) NoteReason(key string, r scheduler.Reason) {
	if w := e.workloads[key]; w != nil {
		w.publishedReason = &r
		w.condPending = r.Token != scheduler.WaitingForPodsReady
	}
}
