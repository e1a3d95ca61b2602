package ingest

import (
	"context"
	"testing"
	"time"
)

// TestFairSeatsServeTheOtherCallerFirst: one seat, alice holds it and has
// two more reads waiting; bob's read, arriving after hers, gets the seat
// alice frees (she holds one, bob none; then served longest ago), so bob
// waits for one of alice's reads, not for her backlog. Then alice's go on.
func TestFairSeatsServeTheOtherCallerFirst(t *testing.T) {
	f := newFairSeats(1)
	ctx := t.Context()
	if err := f.acquire(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	wait := func(who string) {
		go func() {
			if err := f.acquire(ctx, who); err != nil {
				t.Error(err)
				return
			}
			order <- who
		}()
	}
	wait("alice")
	waitQueued(t, f, 1)
	wait("alice")
	waitQueued(t, f, 2)
	wait("bob")
	waitQueued(t, f, 3)
	var got []string
	for range 3 {
		f.release(got0(got, "alice"), 1)
		select {
		case who := <-order:
			got = append(got, who)
		case <-time.After(10 * time.Second):
			t.Fatalf("no seat granted after %v", got)
		}
	}
	if got[0] != "bob" {
		t.Errorf("seats went to %v, want bob first", got)
	}
	f.release(got[2], 1)
	if f.free != 1 || len(f.flows) != 0 || f.waiting != 0 {
		t.Errorf("after every release: free %d, flows %d, waiting %d; want 1, 0, 0", f.free, len(f.flows), f.waiting)
	}
}

// got0 is who holds the seat to release next: alice at first, then the
// last one granted.
func got0(got []string, first string) string {
	if len(got) == 0 {
		return first
	}
	return got[len(got)-1]
}

// TestFairSeatsWaiterLeaves: a waiter whose request ends leaves the
// queue, and a seat is never lost to it.
func TestFairSeatsWaiterLeaves(t *testing.T) {
	f := newFairSeats(1)
	if err := f.acquire(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.acquire(ctx, "bob") }()
	waitQueued(t, f, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("bob's acquire returned no error after its context ended")
	}
	f.release("alice", 1)
	if f.free != 1 || f.waiting != 0 || len(f.flows) != 0 {
		t.Errorf("free %d, waiting %d, flows %d; want 1, 0, 0", f.free, f.waiting, len(f.flows))
	}
	if err := f.acquire(t.Context(), "carol"); err != nil {
		t.Errorf("the seat is lost: %v", err)
	}
}

func waitQueued(t *testing.T, f *fairSeats, n int) {
	t.Helper()
	for range 1000 {
		f.mu.Lock()
		w := f.waiting
		f.mu.Unlock()
		if w == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d waiting never reached", n)
}
