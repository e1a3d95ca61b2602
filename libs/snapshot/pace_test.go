package snapshot

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// TestPacerKeepsWorkToItsShare: after a piece of work of w, Rest sleeps
// w×(1−share)/share; the first call and a share outside (0, 1) never
// sleep; a done context stops it with the context's error.
func TestPacerKeepsWorkToItsShare(t *testing.T) {
	now := t0
	var slept []time.Duration
	p := Pacer{Share: 0.25, Now: func() time.Time { return now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			now = now.Add(d)
			return ctx.Err()
		}}
	ctx := context.Background()
	if err := p.Rest(ctx); err != nil || len(slept) != 0 {
		t.Fatalf("first Rest: %v, slept %v; want no sleep: it only starts the count", err, slept)
	}
	for _, work := range []time.Duration{10 * time.Millisecond, 2 * time.Millisecond} {
		now = now.Add(work)
		if err := p.Rest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Duration{30 * time.Millisecond, 6 * time.Millisecond}; len(slept) != 2 || slept[0] != want[0] || slept[1] != want[1] {
		t.Fatalf("slept %v after 10ms and 2ms of work at a quarter, want %v", slept, want)
	}
	if p.Slept != 36*time.Millisecond {
		t.Fatalf("Slept = %v, want 36ms", p.Slept)
	}

	for _, share := range []float64{0, 1, -1, 2} {
		slept = nil
		q := p
		q.Share, q.since = share, time.Time{}
		_ = q.Rest(ctx)
		now = now.Add(time.Second)
		if err := q.Rest(ctx); err != nil || len(slept) != 0 {
			t.Fatalf("share %v: %v, slept %v; want no sleep", share, err, slept)
		}
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	timed := Pacer{Share: 0.5}
	_ = timed.Rest(ctx)
	time.Sleep(time.Millisecond)
	began := time.Now()
	if err := timed.Rest(done); err != context.Canceled {
		t.Fatalf("Rest on a done context: %v, want context.Canceled", err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Fatalf("Rest on a done context waited %v", waited)
	}
	if timed.Slept != 0 {
		t.Fatalf("a sleep cut short counted %v as slept", timed.Slept)
	}
}

// TestSavePacedRestsBetweenPieces: a paced save compresses 128 KiB
// between two rests and stores what an unpaced one does; a rest's error
// stops it before anything is stored.
func TestSavePacedRestsBetweenPieces(t *testing.T) {
	ctx, js := setup(t)
	publish(t, ctx, js, 5)
	s, _ := open(t, ctx, js, 3, 0)
	payload := bytes.Repeat([]byte("state 12"), 128<<10) // 1 MiB: 8 pieces, 7 rests
	stop := errors.New("stopped")
	rests := 0
	if err := s.SavePaced(ctx, 3, payload, func() error {
		if rests++; rests == 7 {
			return stop
		}
		return nil
	}); err != stop {
		t.Fatalf("save stopped at the 7th rest: %v, want the rest's error", err)
	}
	if sn, err := s.Load(ctx); err != nil || sn != nil {
		t.Fatalf("after a stopped save, Load gives %v, %v; want no snapshot", sn, err)
	}
	rests = 0
	if err := s.SavePaced(ctx, 4, payload, func() error { rests++; return nil }); err != nil {
		t.Fatal(err)
	}
	if rests != 7 {
		t.Fatalf("saving 1 MiB rested %d times, want 7", rests)
	}
	if sn, err := s.Load(ctx); err != nil || sn == nil || sn.Seq != 4 || !bytes.Equal(sn.Payload, payload) {
		t.Fatalf("Load after a paced save: %v (%v)", sn != nil, err)
	}
}
