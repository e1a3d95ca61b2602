// Package replay folds events from the log into an engine. The admission
// and podsready services rebuild their state this way; decisions read back
// are applied as facts and never decided again.
package replay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
)

// Apply folds one event into the engine. An error is an event the engine
// refuses (about an unknown workload, say): the caller logs and skips it,
// since the log is the truth and is never rewritten.
func Apply(eng *engine.Engine, ev events.Event) error {
	now := ev.Time
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		objs, err := api.Decode(d.Object)
		if err != nil || len(objs) != 1 {
			return fmt.Errorf("config object: %v", err)
		}
		_, err = eng.Apply(objs[0], now)
		return err
	case *events.ConfigRef:
		return eng.DeleteConfig(d.Kind, d.Namespace, d.Name, now)
	case *events.WorkloadSubmittedData:
		// Ingest validated it before publishing: plain decoding is enough,
		// and replaying a long log spends most of its time here.
		var wl api.Workload
		if err := json.Unmarshal(d.Workload, &wl); err != nil {
			return fmt.Errorf("workload: %w", err)
		}
		_, err := eng.Submit(&wl, d.CreatedAt)
		return err
	case *events.PriorityChangedData:
		return eng.SetPriority(Key(d.WorkloadRef), d.Priority, now)
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
		case events.WorkloadDeleted:
			return eng.Delete(Key(*d), now)
		case events.PodsReady:
			return eng.PodsReady(Key(*d))
		}
	}
	return nil
}

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
