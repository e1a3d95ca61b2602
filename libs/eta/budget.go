package eta

import "errors"

// Budget bounds one run of a simulation (Sim.Within). The core reads no
// clock: the caller turns its deadline or its client's departure into
// Stop, and its share of the CPU into Steps.
type Budget struct {
	// Steps bounds the steps this run takes (an instant's finishes and
	// one run to quiescence, or a timer); 0 leaves only MaxSteps, which
	// bounds the whole simulation.
	Steps int
	// Stop is asked before each step; an error ends the run with it.
	Stop func() error
}

// ErrBudget is a run that spent its Budget's steps before the workloads
// asked for had their estimates. The simulation stays whole: run on
// (by the same caller or another), it goes on from where it stopped.
var ErrBudget = errors.New("eta: step budget spent")

// Within is Until bounded by b: it stops before a step when b.Stop
// answers an error (returned as is) or when b.Steps are spent
// (ErrBudget). Either way the result so far is returned, the estimates
// given are final, and the simulation may be run on later.
func (x *Sim) Within(keys []string, b Budget) (*Result, error) {
	s := x.s
	clear(s.want)
	for _, k := range keys {
		if e := s.res.Estimates[k]; e != nil && e.At == nil {
			s.want[k] = true
		}
	}
	var err error
	for taken := 0; !x.ended && (keys == nil || len(s.want) > 0); taken++ {
		if b.Stop != nil {
			if err = b.Stop(); err != nil {
				break
			}
		}
		if b.Steps > 0 && taken >= b.Steps {
			err = ErrBudget
			break
		}
		x.taken++
		if !x.step() {
			x.end()
		}
	}
	s.res.UnknownRuns = len(s.unknown)
	return s.res, err
}

// Taken counts the steps run so far over every run: of two simulations
// of the same start, the one that has taken more has every estimate the
// other has.
func (x *Sim) Taken() int { return x.taken }
