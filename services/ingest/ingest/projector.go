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

// project feeds JQ_EVENTS into the PostgreSQL projection: fetch a batch,
// apply it in one transaction (guarded by sequence), then acknowledge it.
// A crash between commit and ack only redelivers events the projection
// already holds, which Apply skips.
func project(ctx context.Context, log *zap.Logger, s jetstream.Stream, st *store.Store) error {
	c, err := bus.EnsureConsumer(ctx, s, bus.ConsumerOptions{Durable: "projector", MaxDeliver: -1, AckWait: time.Minute})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		msgs, err := bus.Batch(ctx, c, 1000, 200*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("projector fetch: %w", err)
		}
		var recs []store.Record
		var batch []jetstream.Msg
		for _, msg := range msgs {
			batch = append(batch, msg)
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
		if len(batch) == 0 {
			continue
		}
		if _, err := st.Apply(ctx, recs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Leave the batch unacknowledged: it is redelivered.
			log.Error("projection batch failed", zap.Error(err))
			for _, m := range batch {
				_ = m.Nak()
			}
			continue
		}
		for _, m := range batch {
			_ = m.Ack()
		}
	}
	return nil
}
