package whatif

import (
	"errors"
	"time"

	"github.com/jetqueue/jetqueue/libs/history"
)

// Budget bounds one what-if. The core reads no clock: the caller turns
// its deadline or its client's departure into Stop.
type Budget struct {
	// MaxSteps bounds the simulated steps (runs to quiescence, Report's
	// Steps); 0: none.
	MaxSteps int
	// Stop is asked between the simulation's steps and every
	// stopEvery records of the fold; an error ends Run with it.
	Stop func() error
}

// ErrBudget is a what-if that needed more than its MaxSteps.
var ErrBudget = errors.New("whatif: step budget spent")

// stopEvery is how many records the fold applies between two questions
// to Stop: a record costs microseconds, a question next to nothing.
const stopEvery = 256

// within says whether the replay may go on.
func (s *simulation) within(b Budget) error {
	if b.Stop != nil {
		if err := b.Stop(); err != nil {
			return err
		}
	}
	if b.MaxSteps > 0 && s.steps > b.MaxSteps {
		// An iteration of the loop settles at most once: the run stops
		// at the first step past the budget.
		return ErrBudget
	}
	return nil
}

// foldKept is history.FoldKept asking o.Stop as it goes.
func foldKept(recs []history.Record, upTo time.Time, o Options) (*history.State, error) {
	if err := history.Kept(recs, upTo, o.Floor); err != nil {
		return nil, err
	}
	st := history.New()
	for i, r := range recs {
		if r.Event.Time.After(upTo) {
			break
		}
		if o.Stop != nil && i%stopEvery == 0 {
			if err := o.Stop(); err != nil {
				return nil, err
			}
		}
		st.Apply(r)
	}
	return st, nil
}
