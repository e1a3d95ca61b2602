package whatif

import (
	"errors"
	"testing"
	"time"
)

// TestBudgetBoundsTheReplay: a what-if past its MaxSteps ends with
// ErrBudget; one whose Stop answers an error ends with it, asked no
// more; within both it answers as without them.
func TestBudgetBoundsTheReplay(t *testing.T) {
	config := flavor + queue("a", "c", "6") + queue("b", "c", "4")
	end := t0.Add(6 * time.Hour)
	r := record(t, config, trace(7, 200, 4*time.Hour), end)
	o := Options{From: t0, To: end}
	free, err := Run(r.Log, o)
	if err != nil {
		t.Fatal(err)
	}
	o.MaxSteps = free.Steps - 1
	if _, err := Run(r.Log, o); !errors.Is(err, ErrBudget) {
		t.Fatalf("%d steps within %d: %v, want ErrBudget", free.Steps, o.MaxSteps, err)
	}
	o.MaxSteps = free.Steps
	if rep, err := Run(r.Log, o); err != nil || rep.Steps != free.Steps {
		t.Fatalf("%d steps within %d: %v", rep.Steps, o.MaxSteps, err)
	}
	gone := errors.New("the client left")
	for _, after := range []int{0, free.Steps / 2} {
		asked := 0
		o := Options{From: t0.Add(time.Hour), To: end, Budget: Budget{Stop: func() error {
			if asked++; asked > after {
				return gone
			}
			return nil
		}}}
		if _, err := Run(r.Log, o); !errors.Is(err, gone) || asked != after+1 {
			t.Fatalf("stopped after %d: %v after %d questions", after, err, asked)
		}
	}
	// The fold of the state at from asks too, every stopEvery records.
	asked := 0
	if _, err := foldKept(r.Log, end, Options{Budget: Budget{Stop: func() error { asked++; return nil }}}); err != nil {
		t.Fatal(err)
	}
	folded := 0
	for _, x := range r.Log {
		if !x.Event.Time.After(end) {
			folded++
		}
	}
	if want := (folded + stopEvery - 1) / stopEvery; asked != want || want < 2 {
		t.Fatalf("a fold of %d records asked %d times, want %d", folded, asked, want)
	}
}
