package bus

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// TestPublishAtomicIsAllOrNothing: a batch whose second fence fails
// stores nothing, not even its first event; with the right fences it
// stores every event, contiguously, at the sequences it returns.
func TestPublishAtomicIsAllOrNothing(t *testing.T) {
	ctx, js, s := setup(t)
	moved, _, err := Publish(ctx, js, podsReady("b-0", "team-a", "b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := moved - 1
	_, err = PublishAtomic(ctx, js, []Write{
		{Event: podsReady("a-1", "team-a", "a"), ExpectLast: ptr(0)},
		{Event: podsReady("b-1", "team-a", "b"), ExpectLast: &stale},
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err %v, want ErrConflict", err)
	}
	if n := messages(t, s); n != 1 {
		t.Fatalf("after the refused batch the stream holds %d messages, want 1", n)
	}
	if _, err := s.GetLastMsgForSubject(ctx, events.WorkloadSubject("team-a", "a")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the first event of the refused batch is in the stream (err %v)", err)
	}

	seqs, err := PublishAtomic(ctx, js, []Write{
		{Event: podsReady("a-1", "team-a", "a"), ExpectLast: ptr(0)},
		{Event: podsReady("b-1", "team-a", "b"), ExpectLast: &moved},
		{Event: podsReady("c-1", "team-a", "c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{moved + 1, moved + 2, moved + 3}
	for i, name := range []string{"a", "b", "c"} {
		m, err := s.GetLastMsgForSubject(ctx, events.WorkloadSubject("team-a", name))
		if err != nil {
			t.Fatal(err)
		}
		if m.Sequence != want[i] || seqs[i] != want[i] {
			t.Errorf("%s: stored at %d, reported %d, want %d", name, m.Sequence, seqs[i], want[i])
		}
	}
	if n := messages(t, s); n != 4 {
		t.Errorf("stream holds %d messages, want 4", n)
	}
}

// TestPublishAtomicRefusesWhatJetStreamWould: a batch with an event
// already in the stream stores nothing and says so; a batch that fences
// a subject it already wrote, or is over the server's size limit, is
// refused before anything is sent.
func TestPublishAtomicRefusesWhatJetStreamWould(t *testing.T) {
	ctx, js, s := setup(t)
	if _, _, err := Publish(ctx, js, podsReady("dup", "team-a", "x"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := PublishAtomic(ctx, js, []Write{{Event: podsReady("new", "team-a", "y")}, {Event: podsReady("dup", "team-a", "x")}})
	if !errors.Is(err, ErrDuplicateInBatch) {
		t.Errorf("err %v, want ErrDuplicateInBatch", err)
	}
	if _, err := PublishAtomic(ctx, js, []Write{
		{Event: podsReady("1", "team-a", "z")}, {Event: podsReady("2", "team-a", "z"), ExpectLast: ptr(0)},
	}); err == nil {
		t.Error("a fence on a subject the batch already wrote was accepted")
	}
	big := make([]Write, MaxAtomic+1)
	for i := range big {
		big[i] = Write{Event: podsReady("big-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), "team-a", "big")}
	}
	if _, err := PublishAtomic(ctx, js, big); err == nil {
		t.Errorf("a batch of %d was accepted", len(big))
	}
	if n := messages(t, s); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

// TestEnsureStreamEnablesAtomicPublish: a JQ_EVENTS declared before
// atomic batches existed gains them when a service starts.
func TestEnsureStreamEnablesAtomicPublish(t *testing.T) {
	ctx, js, s := setup(t)
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishAtomic(ctx, js, []Write{{Event: podsReady("x", "team-a", "x")}}); err == nil {
		t.Fatal("atomic publish worked on a stream without it")
	}
	s, err := EnsureStream(ctx, js, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("EnsureStream left atomic publish off")
	}
	if _, err := PublishAtomic(ctx, js, []Write{{Event: podsReady("x", "team-a", "x")}}); err != nil {
		t.Fatal(err)
	}
}

func messages(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
