package counterfactual

import (
	"time"

	"github.com/jetqueue/jetqueue/libs/history"
)

// Budget bounds one search. The core reads no clock: the caller turns its
// deadline or its client's departure into Stop.
type Budget struct {
	// Probes bounds the engine runs (0, or more than MaxProbes:
	// MaxProbes); a search cut short says so (Result.Exhausted) and
	// keeps what it verified.
	Probes int
	// Stop is asked before each probe, from several goroutines at once
	// (probes run in parallel); an error ends the search with it.
	Stop func() error
	// Workers bounds the probes run at once (0: as many as the
	// package's default, probeWorkers); the result does not depend on it.
	Workers int
}

// SearchFrom is Search with its first copy given: base must be a copy
// build could have made, not run since, and becomes the search's (it runs
// base's engine). A caller that has just read such a copy saves making one more.
func SearchFrom(base *history.State, build func() (*history.State, error), key string, now time.Time) (Result, error) {
	return searchFrom(base, build, key, now, Budget{})
}

// SearchWithin is Search bounded by b.
func SearchWithin(build func() (*history.State, error), key string, now time.Time, b Budget) (Result, error) {
	if b.Stop != nil {
		if err := b.Stop(); err != nil {
			return Result{}, err
		}
	}
	base, err := build()
	if err != nil {
		return Result{}, err
	}
	return searchFrom(base, build, key, now, b)
}

// SearchFromWithin is SearchFrom bounded by b: when b.Stop answers an
// error the search ends with it, with no result.
func SearchFromWithin(base *history.State, build func() (*history.State, error), key string, now time.Time, b Budget) (Result, error) {
	return searchFrom(base, build, key, now, b)
}

func (s *search) maxProbes() int {
	if s.budget.Probes <= 0 {
		return MaxProbes
	}
	return min(s.budget.Probes, MaxProbes)
}

func (s *search) workers() int {
	if s.budget.Workers <= 0 {
		return probeWorkers
	}
	return min(s.budget.Workers, probeWorkers)
}

// asked asks the budget's Stop, once it has answered an error no more.
func (s *search) asked() error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stop == nil && s.budget.Stop != nil {
		s.stop = s.budget.Stop()
	}
	return s.stop
}

// stopped is the error Stop answered, if any.
func (s *search) stopped() error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	return s.stop
}
