package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// ConsumerOptions configure a durable pull consumer of JQ_EVENTS.
type ConsumerOptions struct {
	Durable string
	// FilterSubjects narrows the events; empty means all.
	FilterSubjects []string
	// MaxDeliver bounds redelivery of a message that keeps failing, so a
	// poison event cannot stall a service forever.
	MaxDeliver int
	AckWait    time.Duration
	// AckAll makes an ack cover every earlier message too: for a consumer
	// that handles messages in order, one ack per batch instead of one per
	// message.
	AckAll bool
}

// EnsureConsumer creates or updates a durable pull consumer with explicit
// acks, delivering from the start of the stream on first creation.
func EnsureConsumer(ctx context.Context, s jetstream.Stream, o ConsumerOptions) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       o.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    o.MaxDeliver,
		AckWait:       o.AckWait,
	}
	// One filter goes in FilterSubject, which nats-server before 2.10
	// (still what some distributions ship) understands.
	if len(o.FilterSubjects) == 1 {
		cfg.FilterSubject = o.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = o.FilterSubjects
	}
	if o.AckAll {
		cfg.AckPolicy = jetstream.AckAllPolicy
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = 5
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	c, err := Ensure(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return s.CreateOrUpdateConsumer(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", o.Durable, err)
	}
	return c, nil
}

// Rewind makes a durable consumer deliver again, in order, everything
// after its acknowledgement floor, and returns its state after that. A
// leader taking over a consumer calls it first. Without it, what its
// predecessor fetched and never acknowledged (killed mid-batch) stays
// pending until AckWait, while the events after it are delivered first;
// under AckAll, acknowledging one of those acknowledges the pending ones
// unhandled, and they are never delivered again.
func Rewind(ctx context.Context, s jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	r, err := s.ResetConsumer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("rewind consumer %s to its acknowledgement floor (the consumer reset API, nats-server 2.14 or later): %w", name, err)
	}
	if r.ConsumerInfo != nil {
		return r.ConsumerInfo, nil
	}
	c, err := s.Consumer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return c.Info(ctx)
}

// Handler processes one event; an error makes JetStream redeliver it (up to
// MaxDeliver), a nil ack acknowledges it.
type Handler func(ctx context.Context, seq uint64, ev events.Event) error

// Consume fetches batches from c and hands each message to h in order,
// acknowledging it when h succeeds. It returns when ctx ends.
func Consume(ctx context.Context, c jetstream.Consumer, batch int, h Handler) error {
	for ctx.Err() == nil {
		msgs, err := c.Fetch(batch, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		for msg := range msgs.Messages() {
			meta, err := msg.Metadata()
			if err != nil {
				_ = msg.Term()
				continue
			}
			ev, err := Decode(msg)
			if err != nil {
				// A malformed event never gets better: stop its redelivery.
				_ = msg.TermWithReason(err.Error())
				continue
			}
			if err := h(ctx, meta.Sequence.Stream, ev); err != nil {
				_ = msg.Nak()
				continue
			}
			// The ack outlives ctx: work done during shutdown is still
			// acknowledged rather than redelivered.
			actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = msg.DoubleAck(actx)
			cancel()
			if err != nil {
				return fmt.Errorf("ack %d: %w", meta.Sequence.Stream, err)
			}
		}
		if err := msgs.Error(); err != nil && ctx.Err() == nil && err != jetstream.ErrNoMessages {
			return fmt.Errorf("fetch: %w", err)
		}
	}
	return nil
}

// Follow is Batch for a follower that must know when it has read the
// whole stream: it also reports whether, after msgs, nothing is left.
// last is the sequence of the last message the caller applied before
// this batch. A batch's last message says how many were pending behind
// it. An empty batch says nothing: under load a fetch can time out while
// the stream still holds a backlog (seen replaying a million events), and
// a decider that took that for the end would decide on part of the log,
// admitting against quota that later events show taken. So an empty
// batch asks the consumer: nothing pending, and nothing delivered past
// last (a message delivered after the fetch gave up is not applied yet).
func Follow(ctx context.Context, c Fetcher, max int, wait time.Duration, last uint64) ([]jetstream.Msg, bool, error) {
	msgs, err := Batch(ctx, c, max, wait)
	if err != nil || ctx.Err() != nil {
		return msgs, false, err
	}
	if n := len(msgs); n > 0 {
		meta, err := msgs[n-1].Metadata()
		if err != nil {
			return msgs, false, err
		}
		return msgs, meta.NumPending == 0, nil
	}
	// Bounded: on an idle stream this is asked every wait, and an
	// unanswered one would hold the follower for nats.go's 5 s.
	ictx, cancel := Bounded(ctx)
	info, err := c.Info(ictx)
	cancel()
	if err != nil {
		// Not known to be at the end: the next call asks again.
		return nil, false, nil
	}
	return nil, info.NumPending == 0 && info.Delivered.Stream <= last, nil
}

// Batch returns what is available now, up to max messages, without waiting
// for a full batch; when nothing is available it waits up to wait for the
// next message. Fetch alone would hold every partial batch for its whole
// wait, adding that much latency to each step of a pipeline.
func Batch(ctx context.Context, c Fetcher, max int, wait time.Duration) ([]jetstream.Msg, error) {
	msgs, err := c.FetchNoWait(max)
	if err != nil {
		return nil, err
	}
	out := collect(msgs)
	if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return out, err
	}
	if len(out) > 0 || ctx.Err() != nil {
		return out, nil
	}
	if w, ok := c.(waiter); ok {
		// A Reader waits on what its Consume delivers, and hands out
		// the rest of what arrived with the first.
		msgs, err = w.Wait(max, wait)
	} else {
		msgs, err = c.Fetch(1, jetstream.FetchMaxWait(wait))
	}
	if err != nil {
		return nil, err
	}
	out = collect(msgs)
	if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		return out, err
	}
	return out, nil
}

// waiter is a Fetcher that waits for its next messages itself (Reader).
type waiter interface {
	Wait(batch int, wait time.Duration) (jetstream.MessageBatch, error)
}

func collect(b jetstream.MessageBatch) []jetstream.Msg {
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	return out
}
