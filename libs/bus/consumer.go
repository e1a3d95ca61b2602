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
	c, err := Ensure(ctx, func() (jetstream.Consumer, error) { return s.CreateOrUpdateConsumer(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", o.Durable, err)
	}
	return c, nil
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

// Batch returns what is available now, up to max messages, without waiting
// for a full batch; when nothing is available it waits up to wait for the
// next message. Fetch alone would hold every partial batch for its whole
// wait, adding that much latency to each step of a pipeline.
func Batch(ctx context.Context, c jetstream.Consumer, max int, wait time.Duration) ([]jetstream.Msg, error) {
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
	msgs, err = c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	out = collect(msgs)
	if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		return out, err
	}
	return out, nil
}

func collect(b jetstream.MessageBatch) []jetstream.Msg {
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	return out
}
