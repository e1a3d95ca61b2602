package ingest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestHeavyReadsArePaced: a heavy read's simulation rests between its
// steps in proportion to the time it ran (at a share of 0.5, as long as
// it ran), once per paceQuantum; at a share of 1 it never rests. The step hook
// stands for the work (a sleep of a quantum and a bit); the rests are
// recorded, not slept.
func TestHeavyReadsArePaced(t *testing.T) {
	for _, tc := range []struct {
		share float64
		rests bool
	}{{0.5, true}, {1, false}} {
		g := heavyWorld(t, HeavyLimits{CPUShare: tc.share})
		h := g.heavy()
		var mu sync.Mutex
		var rests []time.Duration
		kinds := map[string]bool{}
		h.sleep = func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			rests = append(rests, d)
			return nil
		}
		h.step = func(_ context.Context, what string) {
			mu.Lock()
			kinds[what] = true
			mu.Unlock()
			time.Sleep(paceQuantum + time.Millisecond)
		}
		if code, _, body := g.call(t, "alice-token", "GET", "/v1/eta?namespace=team-a", ""); code != http.StatusOK {
			t.Fatalf("share %v: ETA: %d %s", tc.share, code, body)
		}
		mu.Lock()
		if !kinds["eta"] {
			t.Fatalf("share %v: no ETA step ran (steps: %v)", tc.share, kinds)
		}
		if tc.rests != (len(rests) > 0) {
			t.Errorf("share %v: %d rests, want rests: %v", tc.share, len(rests), tc.rests)
		}
		for _, d := range rests {
			// At 0.5 a rest is as long as the work before it: a quantum
			// at least.
			if d < paceQuantum {
				t.Errorf("share %v: a rest of %v after at least %v of work", tc.share, d, paceQuantum)
			}
		}
		mu.Unlock()
	}
}
