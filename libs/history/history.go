// Package history rebuilds the state jetqueue stood in at an instant from
// the event log: the engine the deciders held, and the configuration
// objects applied then. It is pure (no I/O, no clock): the caller reads the
// log (services/ingest reads JQ_EVENTS with a bounded range) and hands the
// events over in stream order.
//
//	events (stream order) ──Fold(upTo)──▶ State{Engine, ClusterQueues, Seq, Time}
//
// A point in time T is the longest prefix of the log whose events happened
// at or before T: the fold stops at the first event after T. Decisions are
// applied as the facts the log records (libs/replay), never decided again,
// so the state is exactly the one the deciders had once they had read that
// prefix.
package history

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Record is one event of the log with its stream sequence.
type Record struct {
	Seq   uint64
	Event events.Event
}

// State is jetqueue at an instant.
type State struct {
	Engine *engine.Engine
	// ClusterQueues and Flavors are the objects applied at that instant.
	ClusterQueues map[string]*api.ClusterQueue
	Flavors       map[string]*api.ResourceFlavor
	// LocalQueues maps each LocalQueue (namespace/name) to its
	// ClusterQueue.
	LocalQueues map[string]string
	// Seq and Time are the last event folded (0 and zero before any).
	Seq  uint64
	Time time.Time
	// Skipped counts events the deciders skip too (a decision from a
	// source that does not own it, content that cannot be applied).
	Skipped int
	// Reasons are the reasons the log last recorded per workload, as the
	// projection shows them: an Inadmissible's reason, an eviction's
	// reason (token only), none after an admission.
	Reasons map[string]LoggedReason
	// Kept are the admissions finished workloads held when they finished:
	// Kueue releases a finished workload's quota but leaves its
	// status.admission, and the projection shows it (libs/store).
	Kept map[string]*scheduler.Admission
}

// With is a copy of s with eng as its engine: its maps are its own, the
// objects in them shared (a change replaces an object, never edits it).
func (s *State) With(eng *engine.Engine) *State {
	c := *s
	c.Engine = eng
	c.ClusterQueues, c.Flavors, c.LocalQueues = maps.Clone(s.ClusterQueues), maps.Clone(s.Flavors), maps.Clone(s.LocalQueues)
	c.Reasons, c.Kept = maps.Clone(s.Reasons), maps.Clone(s.Kept)
	return &c
}

// LoggedReason is a workload's last recorded reason.
type LoggedReason struct {
	Token, Message string
	// Detail is the reason value of an Inadmissible event.
	Detail *scheduler.Reason
}

// ErrBeforeHistory is a point in time the log no longer (or never) covers.
var ErrBeforeHistory = errors.New("before the recorded history")

// PurgedError is a point in time retention's purge took the events of:
// an ErrBeforeHistory naming the earliest time answerable after them.
type PurgedError struct {
	// Floor is the purge floor (bus.PurgeFloor): every purged event is at
	// or below it.
	Floor uint64
	// Earliest is the earliest time from which the log answers again;
	// Known says whether the records held an event at or after Floor.
	Earliest time.Time
	Known    bool
}

func (e *PurgedError) Error() string {
	msg := fmt.Sprintf("%s: retention purged events of the log at or below sequence %d (the histories of ended workloads, superseded configuration versions), some of them before the time asked, so the state then cannot be rebuilt", ErrBeforeHistory, e.Floor)
	if !e.Known {
		return msg + "; the log holds no event after them yet: ask for the present (without at)"
	}
	return msg + "; the earliest time answerable after them is " + e.Earliest.UTC().Format(time.RFC3339Nano)
}

func (e *PurgedError) Unwrap() error { return ErrBeforeHistory }

// Earliest is the earliest time from which a log purged up to floor
// answers: the latest time of the records up to and including the first
// one at or after floor (a fold up to it reaches that record). ok is
// false when no record is at or after floor.
func Earliest(recs []Record, floor uint64) (t time.Time, ok bool) {
	for _, r := range recs {
		if r.Event.Time.After(t) {
			t = r.Event.Time
		}
		if r.Seq >= floor {
			return t, true
		}
	}
	return time.Time{}, false
}

// Fold replays records up to and including the last one at or before upTo
// (every record when upTo is zero), from a log nothing was purged from:
// FoldKept with floor 0.
func Fold(recs []Record, upTo time.Time) (*State, error) {
	return FoldKept(recs, upTo, 0)
}

// FoldKept replays records up to and including the last one at or before
// upTo (every record when upTo is zero), from a log whose retention purge
// floor is floor (bus.PurgeFloor, read after the records; 0: never
// purged).
//
// With upTo zero, the present, the records may have gaps: retention
// (docs/retention.md) removes only whole histories of ended workloads and
// superseded configuration versions, so what it keeps folds to the live
// state, exactly as the deciders rebuild theirs from it.
//
// A point in time (upTo set) must be exact (see Exact), and not before
// the first event: ErrBeforeHistory otherwise, naming the earliest time
// available.
func FoldKept(recs []Record, upTo time.Time, floor uint64) (*State, error) {
	if err := Kept(recs, upTo, floor); err != nil {
		return nil, err
	}
	return fold(recs, upTo), nil
}

// Kept is FoldKept's check alone, for a caller that folds the records
// itself (New, then Apply), e.g. as it reads them.
func Kept(recs []Record, upTo time.Time, floor uint64) error {
	if upTo.IsZero() {
		return nil
	}
	if len(recs) == 0 {
		return fmt.Errorf("%w: the log is empty", ErrBeforeHistory)
	}
	if err := Exact(recs, upTo, upTo, floor); err != nil {
		return err
	}
	if upTo.Before(recs[0].Event.Time) {
		return fmt.Errorf("%w: the earliest time available is %s", ErrBeforeHistory, recs[0].Event.Time.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Exact reports, as ErrBeforeHistory, when folding recs up to from and
// replaying them on to to (from <= to; both the same for a point in
// time) would not give exactly what the whole log gives.
//
// The fold up to T is the records up to the first one after T (the log's
// event times follow its order). A sequence missing from the records
// (a gap) is an event removed from the log. Every event retention purges
// is at or below the purge floor: the floor is raised to the gate before
// a purge, and a purge reaches only below the gate. What it purges is the
// whole history of a workload that ended (deleted or expired) at or
// below the floor, and configuration versions superseded by a version at
// or below the floor, which stays. So:
//
//   - no gap before the first record after to: the fold is whole;
//   - a gap above the floor: not retention's, refused (the events removed
//     are named);
//   - gaps at or below the floor only, and the fold up to from reaches
//     the floor (its last record is at or after it): every purged event
//     was folded, with the end of its workload or the version that
//     superseded it, so the state is the one the whole log gives, the
//     same argument by which the deciders rebuild the live state from
//     the purged log; from then on nothing is missing;
//   - otherwise a PurgedError naming the earliest time answerable: a
//     purged workload may have been live then, or a purged version
//     current.
func Exact(recs []Record, from, to time.Time, floor uint64) error {
	// last is the last record of the fold up to from; next the first
	// record after to.
	last, next, folding := uint64(0), len(recs), true
	for i, r := range recs {
		if r.Event.Time.After(to) {
			next = i
			break
		}
		if folding = folding && !r.Event.Time.After(from); folding {
			last = r.Seq
		}
	}
	if next == len(recs) {
		next-- // no record after to: the gaps up to the last one
	}
	purged, prev := false, uint64(0)
	for _, r := range recs[:next+1] {
		if r.Seq > prev+1 {
			if r.Seq-1 > floor {
				if prev == 0 {
					return fmt.Errorf("%w: the log's events before sequence %d (%s) were removed, and a point in time is rebuilt from the whole log",
						ErrBeforeHistory, r.Seq, r.Event.Time.UTC().Format(time.RFC3339Nano))
				}
				return fmt.Errorf("%w: the log's events %d to %d were removed, and a point in time after them is rebuilt from the whole log",
					ErrBeforeHistory, prev+1, r.Seq-1)
			}
			purged = true
		}
		prev = r.Seq
	}
	if purged && last < floor {
		e := &PurgedError{Floor: floor}
		e.Earliest, e.Known = Earliest(recs, floor)
		return e
	}
	return nil
}

func fold(recs []Record, upTo time.Time) *State {
	st := New()
	for _, r := range recs {
		if !upTo.IsZero() && r.Event.Time.After(upTo) {
			break
		}
		st.Apply(r)
	}
	return st
}

// New is the state before any event: folding records into it one by one
// with Apply gives what Fold of the present gives. A replica kept up to
// date this way (services/ingest's ETAs) reads each event once.
func New() *State {
	return &State{Engine: engine.New(), ClusterQueues: map[string]*api.ClusterQueue{}, Flavors: map[string]*api.ResourceFlavor{},
		Reasons: map[string]LoggedReason{}, LocalQueues: map[string]string{}, Kept: map[string]*scheduler.Admission{}}
}

// Apply folds one more record, the next in stream order, as a decider
// does: a decision from a source that does not own it, or one that cannot
// be applied, is skipped.
func (st *State) Apply(r Record) {
	st.Seq, st.Time = r.Seq, r.Event.Time
	ev := r.Event
	if events.CheckSource(ev) != nil {
		st.Skipped++
		return
	}
	var held *scheduler.Admission
	if d, ok := ev.Data.(*events.WorkloadFinishedData); ok {
		if w := st.Engine.Workload(replay.Key(d.WorkloadRef)); w != nil && w.Status == engine.Admitted {
			held = w.Admission
		}
	}
	if err := replay.Guard(func() error { return replay.Apply(st.Engine, ev) }); err != nil {
		st.Skipped++
		return
	}
	if held != nil {
		st.Kept[replay.Key(ev.Data.(*events.WorkloadFinishedData).WorkloadRef)] = held
	}
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		delete(st.Reasons, replay.Key(d.WorkloadRef))
	case *events.QuotaReservedData:
		delete(st.Reasons, replay.Key(d.WorkloadRef))
	case *events.InadmissibleData:
		r := d.Reason
		st.Reasons[replay.Key(d.WorkloadRef)] = LoggedReason{Token: r.Token, Message: r.Message, Detail: &r}
	case *events.EvictedData:
		st.Reasons[replay.Key(d.WorkloadRef)] = LoggedReason{Token: d.Reason}
	case *events.WorkloadRef:
		if events.Ends(ev.Type) {
			// Gone from the engine: nothing reads its reason again, and a
			// state kept up to date must not grow with the history.
			delete(st.Reasons, replay.Key(*d))
			delete(st.Kept, replay.Key(*d))
		}
	case *events.ConfigAppliedData:
		objs, err := api.Decode(d.Object)
		if err != nil || len(objs) != 1 {
			return
		}
		switch o := objs[0].(type) {
		case *api.ClusterQueue:
			st.ClusterQueues[o.Name] = o
		case *api.ResourceFlavor:
			st.Flavors[o.Name] = o
		case *api.LocalQueue:
			st.LocalQueues[api.NamespacedName(o.Namespace, o.Name)] = o.Spec.ClusterQueue
		}
	case *events.ConfigRef:
		switch d.Kind {
		case api.KindClusterQueue:
			delete(st.ClusterQueues, d.Name)
		case api.KindResourceFlavor:
			delete(st.Flavors, d.Name)
		case api.KindLocalQueue:
			delete(st.LocalQueues, api.NamespacedName(d.Namespace, d.Name))
		}
	}
}

// Whole reports, as ErrBeforeHistory, sequences missing between records
// up to upTo (all when zero): events removed from the middle of the log.
func Whole(recs []Record, upTo time.Time) error {
	for i := 1; i < len(recs); i++ {
		if !upTo.IsZero() && recs[i].Event.Time.After(upTo) {
			return nil
		}
		if recs[i].Seq != recs[i-1].Seq+1 {
			return fmt.Errorf("%w: the log's events %d to %d were removed, and a point in time after them is rebuilt from the whole log",
				ErrBeforeHistory, recs[i-1].Seq+1, recs[i].Seq-1)
		}
	}
	return nil
}

// Builder returns a function that folds the same records into a fresh
// state each time it is called: what counterfactuals change is a copy.
func Builder(recs []Record, upTo time.Time) func() (*State, error) {
	return func() (*State, error) { return Fold(recs, upTo) }
}

// Compact keeps, of the records up to upTo, what the state of the live
// workloads depends on: every configuration event, and every event of the
// workloads that are pending, admitted or inactive at upTo. The events of
// workloads finished or deleted by then, and placements and batch
// bookkeeping, are dropped. Folding the result gives the same
// configuration and the same live workloads, with their admissions,
// priorities and reasons (the finished and deleted ones are absent), in
// proportion to the live workloads rather than to the whole history:
// counterfactual probes fold it many times. Its records are numbered
// from 1 again.
func Compact(recs []Record, upTo time.Time) ([]Record, error) {
	return CompactKept(recs, upTo, 0)
}

// CompactKept is Compact of a log purged up to floor (see FoldKept).
func CompactKept(recs []Record, upTo time.Time, floor uint64) ([]Record, error) {
	st, err := FoldKept(recs, upTo, floor)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(recs)/4+1)
	if len(recs) > 0 {
		// The log's first sequence and time stand, whatever is dropped:
		// they say where the history starts.
		out = append(out, Record{Seq: recs[0].Seq, Event: events.Event{ID: "compacted", Time: recs[0].Event.Time}})
	}
	for _, r := range recs {
		if !upTo.IsZero() && r.Event.Time.After(upTo) {
			break
		}
		switch ref, ok := workloadOf(r.Event); {
		case !ok:
			switch r.Event.Data.(type) {
			case *events.ConfigAppliedData, *events.ConfigRef:
				out = append(out, r)
			}
		case r.Event.Type == events.Placed:
		default:
			if w := st.Engine.Workload(replay.Key(ref)); w != nil && w.Status != engine.Finished {
				out = append(out, r)
			}
		}
	}
	// Numbered again, whole: the result is a log of its own.
	for i := range out {
		out[i].Seq = uint64(i + 1)
	}
	return out, nil
}

// workloadOf is the workload an event is about.
func workloadOf(ev events.Event) (events.WorkloadRef, bool) {
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		return d.WorkloadRef, true
	case *events.PriorityChangedData:
		return d.WorkloadRef, true
	case *events.ActiveChangedData:
		return d.WorkloadRef, true
	case *events.WorkloadFinishedData:
		return d.WorkloadRef, true
	case *events.QuotaReservedData:
		return d.WorkloadRef, true
	case *events.InadmissibleData:
		return d.WorkloadRef, true
	case *events.PreemptionRequestedData:
		return d.WorkloadRef, true
	case *events.EvictedData:
		return d.WorkloadRef, true
	case *events.RequeuedData:
		return d.WorkloadRef, true
	case *events.PlacedData:
		return d.WorkloadRef, true
	case *events.WorkloadRef:
		return *d, true
	}
	return events.WorkloadRef{}, false
}
