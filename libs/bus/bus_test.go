package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T) (context.Context, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	_, js := startJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := EnsureStream(ctx, js, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, js, s
}

func podsReady(id, ns, name string) events.Event {
	return events.Event{ID: id, Type: events.PodsReady, Source: "test", Time: t0,
		Subject: events.WorkloadSubject(ns, name), Data: &events.WorkloadRef{Namespace: ns, Name: name}}
}

func TestEnsureStreamIsIdempotent(t *testing.T) {
	ctx, js, _ := setup(t)
	if _, err := EnsureStream(ctx, js, StreamOptions{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.CachedInfo().Config; cfg.MaxAge != time.Hour || cfg.Storage != jetstream.FileStorage {
		t.Errorf("stream config not updated: max age %v storage %v", cfg.MaxAge, cfg.Storage)
	}
}

func TestPublishDeduplicatesByEventID(t *testing.T) {
	ctx, js, s := setup(t)
	ev := podsReady("ev-1", "team-a", "w")
	seq1, dup1, err := Publish(ctx, js, ev, nil)
	if err != nil || dup1 {
		t.Fatalf("first publish: seq %d dup %v err %v", seq1, dup1, err)
	}
	seq2, dup2, err := Publish(ctx, js, ev, nil)
	if err != nil || !dup2 || seq2 != seq1 {
		t.Fatalf("second publish: seq %d dup %v err %v; want a duplicate of %d", seq2, dup2, err, seq1)
	}
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
}

// TestExpectedSubjectSequenceFencesWriters: two writers that read the same
// subject position cannot both write.
func TestExpectedSubjectSequenceFencesWriters(t *testing.T) {
	ctx, js, _ := setup(t)
	first, _, err := Publish(ctx, js, podsReady("a", "team-a", "w"), ptr(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Publish(ctx, js, podsReady("b", "team-a", "w"), ptr(first)); err != nil {
		t.Fatalf("writer at the head: %v", err)
	}
	_, _, err = Publish(ctx, js, podsReady("c", "team-a", "w"), ptr(first))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale writer: %v, want ErrConflict", err)
	}
	if _, _, err := Publish(ctx, js, podsReady("d", "team-a", "other"), ptr(0)); err != nil {
		t.Fatalf("another workload's subject is independent: %v", err)
	}
}

func TestConsumeDeliversInOrderAndTerminatesPoison(t *testing.T) {
	ctx, js, s := setup(t)
	for i := range 5 {
		if _, _, err := Publish(ctx, js, podsReady(fmt.Sprint("id-", i), "ns", fmt.Sprint("w", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// A message that is not a CloudEvent at all.
	if _, err := js.Publish(ctx, events.WorkloadSubject("ns", "junk"), []byte("junk")); err != nil {
		t.Fatal(err)
	}
	c, err := EnsureConsumer(ctx, s, ConsumerOptions{Durable: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	var got []string
	err = Consume(cctx, c, 10, func(_ context.Context, seq uint64, ev events.Event) error {
		got = append(got, ev.Data.(*events.WorkloadRef).Name)
		if len(got) == 5 {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[w0 w1 w2 w3 w4]" {
		t.Errorf("delivered %v", got)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumPending != 0 || ci.NumAckPending != 0 {
		t.Errorf("pending %d, ack pending %d; want everything acked or terminated", ci.NumPending, ci.NumAckPending)
	}
}

func TestLeaseIsExclusiveAndFenced(t *testing.T) {
	ctx, js, _ := setup(t)
	kv, _, err := EnsureLeaseBucket(ctx, js, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Acquire(ctx, kv, "admission-0", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, kv, "admission-0", "b"); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second holder: %v, want ErrLeaseHeld", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(ctx, kv, "admission-0", "b")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := a.Check(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's fence: %v, want ErrLeaseLost", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's renewal: %v, want ErrLeaseLost", err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseExpiresWithoutRenewal: a dead holder's lease lapses after the
// bucket TTL, so a standby can take over.
func TestLeaseExpiresWithoutRenewal(t *testing.T) {
	ctx, js, _ := setup(t)
	kv, _, err := EnsureLeaseBucket(ctx, js, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, kv, "k", "dead"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := Acquire(ctx, kv, "k", "standby"); err == nil {
			return
		} else if !errors.Is(err, ErrLeaseHeld) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ptr(v uint64) *uint64 { return &v }

// TestLeaseBucketKeepsTheFirstTTL: a service configured with another TTL
// joins the bucket as it is and renews on the bucket's TTL, so its lease
// never lapses between renewals and nobody else's TTL changes.
func TestLeaseBucketKeepsTheFirstTTL(t *testing.T) {
	ctx, js, _ := setup(t)
	if _, ttl, err := EnsureLeaseBucket(ctx, js, time.Second); err != nil || ttl != time.Second {
		t.Fatalf("first: ttl %v, %v", ttl, err)
	}
	kv, ttl, err := EnsureLeaseBucket(ctx, js, time.Minute)
	if err != nil || ttl != time.Second {
		t.Fatalf("second: ttl %v, %v; want the bucket's 1s", ttl, err)
	}
	l := NewLeadership(kv, "shard", "a", ttl)
	if leading, err := l.Lead(ctx); err != nil || !leading {
		t.Fatalf("lead: %v %v", leading, err)
	}
	defer l.Release()
	// Three TTLs later the lease is still held: renewed on the bucket's TTL.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(3 * time.Second):
	}
	if err := l.Check(ctx); err != nil {
		t.Errorf("lease lapsed: %v", err)
	}
}
