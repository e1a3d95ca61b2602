package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/store"
)

const projectorDurable = "projector"

// project feeds JQ_EVENTS into the PostgreSQL projection: fetch a batch,
// apply it in one transaction (guarded by sequence), then acknowledge it.
// A crash between commit and ack only redelivers events the projection
// already holds, which Apply skips. A request on rebuild drops the
// projection and replays the stream from the start.
func project(ctx context.Context, log *zap.Logger, s jetstream.Stream, st *store.Store, rebuild <-chan chan error) error {
	c, err := bus.EnsureConsumer(ctx, s, bus.ConsumerOptions{Durable: projectorDurable, MaxDeliver: -1, AckWait: time.Minute})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		select {
		case done := <-rebuild:
			c, err = restart(ctx, s, st)
			done <- err
			if err != nil {
				return err
			}
			log.Info("projection dropped; replaying the stream")
		default:
		}
		msgs, err := bus.Batch(ctx, c, 1000, 200*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projector fetch: %w", err)
		}
		var recs []store.Record
		for _, msg := range msgs {
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			ev, err := bus.Decode(msg)
			if err != nil {
				log.Warn("projector skips an event that does not decode", zap.Uint64("seq", meta.Sequence.Stream), zap.Error(err))
				continue
			}
			recs = append(recs, store.Record{Seq: meta.Sequence.Stream, Event: ev})
		}
		if len(msgs) == 0 {
			continue
		}
		if _, err := st.Apply(ctx, recs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Leave the batch unacknowledged: it is redelivered.
			log.Error("projection batch failed", zap.Error(err))
			for _, m := range msgs {
				_ = m.Nak()
			}
			continue
		}
		for _, m := range msgs {
			_ = m.Ack()
		}
	}
	return nil
}

// restart empties the projection and starts its consumer over from the
// first event.
func restart(ctx context.Context, s jetstream.Stream, st *store.Store) (jetstream.Consumer, error) {
	if err := s.DeleteConsumer(ctx, projectorDurable); err != nil {
		return nil, fmt.Errorf("drop the projector's consumer: %w", err)
	}
	if err := st.Reset(ctx); err != nil {
		return nil, fmt.Errorf("drop the projection: %w", err)
	}
	return bus.EnsureConsumer(ctx, s, bus.ConsumerOptions{Durable: projectorDurable, MaxDeliver: -1, AckWait: time.Minute})
}
