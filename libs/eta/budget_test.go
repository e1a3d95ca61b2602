package eta

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWithinStopsAndGoesOn: a run stopped by its Stop takes no further
// step and returns the Stop's error; one past its Steps returns
// ErrBudget after exactly that many; run on in pieces, the simulation
// ends with the whole run's result.
func TestWithinStopsAndGoesOn(t *testing.T) {
	_, now, r := replicaOf(t, 150, 3)
	whole, err := r.Estimates(now)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Steps < 10 {
		t.Fatalf("%d steps: the log is too easy", whole.Steps)
	}
	x, err := r.Start(now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	asked := 0
	_, err = x.Within(nil, Budget{Stop: func() error {
		if asked++; asked == 4 {
			cancel()
		}
		return ctx.Err()
	}})
	if !errors.Is(err, context.Canceled) || asked != 4 || x.Taken() != 3 {
		t.Fatalf("stopped: %v after %d questions and %d steps, want context.Canceled after 4 and 3", err, asked, x.Taken())
	}
	for pieces := 1; ; pieces++ {
		before := x.Taken()
		res, err := x.Within(nil, Budget{Steps: 2})
		if err == nil {
			if x.Taken()-before > 2 {
				t.Fatalf("piece %d took %d steps, want at most 2", pieces, x.Taken()-before)
			}
			if d := cmp.Diff(whole, res); d != "" {
				t.Fatalf("run in pieces of 2 steps (-whole,+pieces):\n%s", d)
			}
			return
		}
		if !errors.Is(err, ErrBudget) || x.Taken() != before+2 {
			t.Fatalf("piece %d: %v after %d steps, want ErrBudget after 2", pieces, err, x.Taken()-before)
		}
	}
}
