// Package replay folds events from the log into an engine. The admission
// and podsready services rebuild their state this way; decisions read back
// are applied as facts and never decided again.
package replay

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
)

// Apply folds one event into the engine. An error is an event that cannot
// be applied: its content is impossible (a config object or a workload
// that does not decode, a decision about a workload that does not exist).
// The caller skips it by the services' one rule (service.Runtime.Skip),
// since the log is the truth and is never rewritten. What the log may
// legitimately hold is no error: a decision about a workload that has
// since moved on is a no-op, and so is a PodsReady report about a workload
// that holds no quota (ingest accepts it at any time).
func Apply(eng *engine.Engine, ev events.Event) error {
	if err := known(eng, ev); err != nil {
		return err
	}
	now := ev.Time
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		objs, err := api.Decode(d.Object)
		if err != nil {
			return fmt.Errorf("config object: %w", err)
		}
		if len(objs) != 1 {
			return fmt.Errorf("config object: %d objects, want 1", len(objs))
		}
		_, err = eng.Apply(objs[0], now)
		return err
	case *events.ConfigRef:
		return eng.DeleteConfig(d.Kind, d.Namespace, d.Name, now)
	case *events.WorkloadSubmittedData:
		// Replaying a long log spends most of its time here.
		wl, err := api.DecodeStored(d.Workload)
		if err != nil {
			return fmt.Errorf("workload: %w", err)
		}
		_, err = eng.Submit(wl, d.CreatedAt)
		return err
	case *events.PriorityChangedData:
		return eng.SetPriority(Key(d.WorkloadRef), d.Priority, now)
	case *events.ActiveChangedData:
		return eng.SetActive(Key(d.WorkloadRef), d.Active, now)
	case *events.WorkloadFinishedData:
		return eng.Finish(Key(d.WorkloadRef), now)
	case *events.QuotaReservedData:
		eng.ApplyAdmission(Key(d.WorkloadRef), d.Admission, now)
	case *events.InadmissibleData:
		eng.NoteReason(Key(d.WorkloadRef), d.Reason)
	case *events.EvictedData:
		applyEviction(eng, d, now)
	case *events.RequeuedData:
		eng.ApplyRequeue(Key(d.WorkloadRef), now)
	case *events.WorkloadRef:
		switch ev.Type {
		case events.WorkloadDeleted, events.WorkloadExpired:
			// An expiry ends a finished workload as a deletion does.
			return eng.Delete(Key(*d), now)
		case events.PodsReady:
			if err := eng.PodsReady(Key(*d)); !errors.Is(err, engine.ErrNotAdmitted) {
				return err
			}
		}
	}
	return nil
}

// known refuses a decision about a workload the engine never heard of.
// Every decision is published fenced on its workload's subject at a
// sequence where the workload existed, so one about an unknown workload is
// impossible content, not a race.
func known(eng *engine.Engine, ev events.Event) error {
	var ref events.WorkloadRef
	switch d := ev.Data.(type) {
	case *events.QuotaReservedData:
		ref = d.WorkloadRef
	case *events.InadmissibleData:
		ref = d.WorkloadRef
	case *events.EvictedData:
		ref = d.WorkloadRef
	case *events.RequeuedData:
		ref = d.WorkloadRef
	default:
		return nil
	}
	if eng.Workload(Key(ref)) == nil {
		return fmt.Errorf("%s about workload %s: %w", ev.Type, Key(ref), engine.ErrNotFound)
	}
	return nil
}

// Guard runs apply, turning a panic into an error, so that one event whose
// content trips a bug is skipped like any other that cannot be applied
// instead of killing the service on every replay of it.
func Guard(apply func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrPanicked, p)
		}
	}()
	return apply()
}

// ErrPanicked marks an event whose application panicked.
var ErrPanicked = errors.New("applying the event panicked")

func applyEviction(eng *engine.Engine, d *events.EvictedData, now time.Time) {
	k := Key(d.WorkloadRef)
	switch d.Reason {
	case engine.EvictedByPodsReadyTimeout:
		var at time.Time
		if d.RequeueAt != nil {
			at = *d.RequeueAt
		}
		eng.ApplyTimeout(k, d.RequeueCount, at, now)
	case engine.EvictedByDeactivation:
		eng.ApplyDeactivation(k, now)
	default:
		eng.ApplyEviction(k, engine.Eviction{Reason: d.Reason, Kind: d.Kind, PreemptorCQ: d.PreemptorCQ}, now)
	}
}

// Evictions renders the evictions a preemption request asks for, one per
// victim in order: what the preemptor publishes, and what an admission
// leader taking over an unfinished request applies ahead of them. Each
// happens at the instant the preemption was decided, and its id derives
// from the request's, so that a repeat is deduplicated.
func Evictions(req events.Event, d *events.PreemptionRequestedData) []events.Event {
	out := make([]events.Event, 0, len(d.Victims))
	for i, v := range d.Victims {
		preemptor := d.WorkloadRef
		out = append(out, events.Event{ID: fmt.Sprintf("preemptor/%s/%d", req.ID, i), Type: events.Evicted,
			Source: "jetqueue/preemptor", Time: req.Time, Subject: events.WorkloadSubject(v.Namespace, v.Name),
			Data: &events.EvictedData{WorkloadRef: v.WorkloadRef, Reason: engine.EvictedByPreemption,
				Preemptor: &preemptor, PreemptorCQ: d.ClusterQueue, Kind: v.Kind}})
	}
	return out
}

// Key is a workload's engine key.
func Key(r events.WorkloadRef) string { return api.NamespacedName(r.Namespace, r.Name) }
