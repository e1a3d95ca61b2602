package clock

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestManualClockIsShared: two participants see one clock; advances add
// up; it starts where the simulator's does and never goes back.
func TestManualClockIsShared(t *testing.T) {
	srv := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	join := func() *Manual { return joinClock(ctx, t, srv.ClientURL()) }
	a, b := join(), join()
	if !a.Now().Equal(Start) || !b.Now().Equal(Start) {
		t.Fatalf("start %v %v", a.Now(), b.Now())
	}
	if _, err := a.Advance(ctx, 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Advance(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	want := Start.Add(7 * time.Minute)
	for deadline := time.Now().Add(5 * time.Second); !a.Now().Equal(want) || !b.Now().Equal(want); {
		if time.Now().After(deadline) {
			t.Fatalf("a %v b %v, want %v", a.Now(), b.Now(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.Advance(ctx, -time.Second); err == nil {
		t.Error("moved backwards")
	}
}

// TestJoiningDuringAnAdvanceSeesIt: a participant that joins while another
// advances the clock ends up at the final time. (A restarted service used
// to miss an advance made between its first read and its watch, and kept
// the old time until the next one.)
func TestJoiningDuringAnAdvanceSeesIt(t *testing.T) {
	srv := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	join := func() *Manual { return joinClock(ctx, t, srv.ClientURL()) }
	mover := join()
	for range 30 {
		joined, advanced := make(chan struct{}), make(chan time.Time)
		go func() {
			for {
				now, err := mover.Advance(ctx, time.Second)
				select {
				case <-joined:
					advanced <- now
					return
				default:
				}
				if err != nil {
					advanced <- now
					return
				}
			}
		}()
		joiner := join()
		close(joined)
		want := <-advanced
		for deadline := time.Now().Add(5 * time.Second); !joiner.Now().Equal(want); {
			if time.Now().After(deadline) {
				t.Fatalf("joined during advances: at %v, want %v", joiner.Now(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// joinClock is one participant: its own connection to the shared clock.
func joinClock(ctx context.Context, t *testing.T, url string) *Manual {
	t.Helper()
	nc, err := bus.Connect(url, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	m, err := NewManual(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
