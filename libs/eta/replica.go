package eta

import (
	"maps"
	"time"

	"github.com/jetqueue/jetqueue/libs/history"
)

// Replica is the present state kept up to date one event at a time, with
// the run times learnt so far, so that an estimate starts from the state
// as it is now instead of folding the whole log again:
//
//	event ──Apply──▶ history.State (the deciders' fold) + Learner (run times)
//	now ──Estimates──▶ a copy of the engine (engine.Clone, in proportion
//	                   to the state, not to the history) ──▶ Result
//
// Estimates over a replica that has applied records 1…n equal Estimates
// over the fold of those records (TestReplicaEqualsFullReplay).
type Replica struct {
	st    *history.State
	learn *Learner
}

// NewReplica returns the replica of an empty log.
func NewReplica() *Replica {
	return &Replica{st: history.New(), learn: NewLearner()}
}

// Apply takes the log's next record.
func (r *Replica) Apply(rec history.Record) {
	r.st.Apply(rec)
	r.learn.Observe(rec.Event)
	// Nothing consumes the evictions a fold notes: drained so that they
	// do not pile up (an estimate drains its copy's before deciding).
	r.st.Engine.DrainEvictions()
}

// State is the folded state; the caller must not modify it.
func (r *Replica) State() *history.State { return r.st }

// Builder returns a function that makes a fresh copy of the state as it
// is now each time it is called (what a counterfactual probe changes is a
// copy): the engine cloned here, once, and that clone cloned per call;
// the rest shallow-copied (a probe replaces objects, it never edits
// them). The replica goes on applying events meanwhile, on another
// goroutine than the searches: the copies never read its engine again.
// The function may be called from several goroutines.
func (r *Replica) Builder() (func() (*history.State, error), error) {
	base := r.st.Engine.Clone()
	// Cloning only reads base: the copies may be taken at once, as a
	// counterfactual search takes its probes' (TestClonesAtOnce).
	st := r.st.With(base)
	return func() (*history.State, error) { return st.With(base.Clone()), nil }, nil
}

// Estimates runs the core forward from now on a copy of the state.
func (r *Replica) Estimates(now time.Time) (*Result, error) {
	x, err := r.Start(now)
	if err != nil {
		return nil, err
	}
	return x.Until(nil), nil
}

// Starter returns a function that starts a simulation from now on a
// fresh copy of the state and run times as they are now, each time it is
// called: the engine is cloned here, once, and that clone cloned per
// call. The function may be called from several goroutines, while the
// replica goes on applying events: it never reads the replica again.
func (r *Replica) Starter(now time.Time) func() *Sim {
	base := r.st.Engine.Clone()
	runs := maps.Clone(r.learn.Runs())
	return func() *Sim { return Start(base.Clone(), runs, now) }
}

// Start prepares a simulation from now on a copy of the state and of the
// run times learnt so far (the replica goes on applying events; the
// simulation keeps what it started from).
func (r *Replica) Start(now time.Time) (*Sim, error) {
	return Start(r.st.Engine.Clone(), maps.Clone(r.learn.Runs()), now), nil
}
