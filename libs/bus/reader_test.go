package bus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// publishN puts n events on the stream (sequences 1…n).
func publishN(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) {
	t.Helper()
	publishMore(t, ctx, js, 0, n)
}

// publishMore puts n more events on a stream holding from.
func publishMore(t *testing.T, ctx context.Context, js jetstream.JetStream, from, n int) {
	t.Helper()
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := from; i < from+n; i++ {
		f, err := PublishAsync(js, podsReady(fmt.Sprint("id-", i), "ns", fmt.Sprint("w", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

// readAll follows r to the end of the stream, calling between after each
// batch, and returns the stream sequences it handed out, in order.
func readAll(t *testing.T, ctx context.Context, r *Reader, between func(read int)) []uint64 {
	t.Helper()
	var seqs []uint64
	var last uint64
	for range 10_000 {
		msgs, atEnd, err := Follow(ctx, r, 64, 100e6, last)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			last = meta.Sequence.Stream
			seqs = append(seqs, last)
		}
		if atEnd {
			return seqs
		}
		if between != nil {
			between(len(seqs))
		}
	}
	t.Fatal("never reached the end of the stream")
	return nil
}

// checkEach asserts seqs is exactly 1…n, in order.
func checkEach(t *testing.T, seqs []uint64, n int) {
	t.Helper()
	if len(seqs) != n {
		t.Fatalf("read %d messages, want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("message %d has stream sequence %d, want %d (lost or repeated)", i, s, i+1)
		}
	}
}

// TestReaderReadsEachOnceFromOneConsumer: a Reader hands out every message
// once, in order, over many fetches, from one consumer (nats.go's ordered
// consumer would have created one per fetch).
func TestReaderReadsEachOnceFromOneConsumer(t *testing.T) {
	ctx, js, _ := setup(t)
	const n = 1000
	publishN(t, ctx, js, n)
	r, err := NewReader(ctx, js, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	first := r.cons.CachedInfo().Name
	checkEach(t, readAll(t, ctx, r, nil), n)
	if r.cons == nil || r.cons.CachedInfo().Name != first {
		t.Fatalf("the reader changed consumers without a gap or an error")
	}
	s, err := js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 1 {
		t.Fatalf("the stream has %d consumers after %d fetches, want 1", info.State.Consumers, n/64+1)
	}
}

// readAcross publishes n events and reads them all with a Reader, calling
// disrupt once, after at least after messages were read; it checks each
// message was handed out once, in order.
func readAcross(t *testing.T, n, after int, disrupt func(ctx context.Context, js jetstream.JetStream, r *Reader)) {
	t.Helper()
	ctx, js, _ := setup(t)
	publishN(t, ctx, js, n)
	r, err := NewReader(ctx, js, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	done := false
	seqs := readAll(t, ctx, r, func(read int) {
		if read >= after && !done {
			done = true
			disrupt(ctx, js, r)
		}
	})
	if !done {
		t.Fatal("the read was never disrupted")
	}
	checkEach(t, seqs, n)
}

// TestReaderSkipsNothingAcrossAGap: messages the consume delivered that
// never reached the reader (lost on the way: here taken from its buffer
// behind its back and thrown away) are a gap in the consumer sequence; the
// reader reads them again from a fresh consumer.
func TestReaderSkipsNothingAcrossAGap(t *testing.T) {
	readAcross(t, 600, 200, func(ctx context.Context, _ jetstream.JetStream, r *Reader) {
		for lost := 0; lost < 10; {
			select {
			case <-r.feed.ch:
				lost++
			case <-ctx.Done():
				t.Fatalf("lost %d messages, want 10", lost)
			}
		}
	})
}

// TestReaderGoesOnWhenItsConsumerIsGone: the consumer deleted on the
// server (as a NATS restart or the inactivity threshold does) is started
// again after the last message handed out.
func TestReaderGoesOnWhenItsConsumerIsGone(t *testing.T) {
	readAcross(t, 600, 300, func(ctx context.Context, js jetstream.JetStream, r *Reader) {
		if err := js.DeleteConsumer(ctx, events.Stream, r.cons.CachedInfo().Name); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReaderRestartsAfterItsConsumeFails: when its consumer is deleted
// under it, the reader starts a fresh consumer on its own, after the last
// message handed out, without Follow asking the consumer's info: events
// published after the deletion can only come through the fresh one.
func TestReaderRestartsAfterItsConsumeFails(t *testing.T) {
	ctx, js, _ := setup(t)
	const n = 300
	publishN(t, ctx, js, n)
	r, err := NewReader(ctx, js, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	read := func(want int) {
		for range 300 {
			b, err := r.Wait(64, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range collect(b) {
				meta, err := m.Metadata()
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, meta.Sequence.Stream)
			}
			if len(seqs) >= want {
				return
			}
		}
	}
	read(n)
	if err := js.DeleteConsumer(ctx, events.Stream, r.cons.CachedInfo().Name); err != nil {
		t.Fatal(err)
	}
	publishMore(t, ctx, js, n, n)
	read(2 * n)
	checkEach(t, seqs, 2*n)
}
