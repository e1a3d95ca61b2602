package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// ReadLog reads the whole of JQ_EVENTS, from its first sequence to the
// last its stream info reports. The stream keeps everything (no limits,
// nothing deleted), so it must start at 1 and have no gap; a gap, an
// event that does not decode or a read that stalls is an error, never a
// shorter log.
func ReadLog(ctx context.Context, js jetstream.JetStream) ([]Record, error) {
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.Stream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s info: %w", events.Stream, err)
	}
	last := info.State.LastSeq
	if last == 0 {
		return nil, nil
	}
	if info.State.FirstSeq != 1 || info.State.Msgs != last {
		return nil, fmt.Errorf("stream %s holds %d messages from seq %d to %d: some were deleted",
			events.Stream, info.State.Msgs, info.State.FirstSeq, last)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", events.Stream, err)
	}
	log := make([]Record, 0, last)
	for uint64(len(log)) < last {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read %s after seq %d: %w", events.Stream, len(log), err)
		}
		n := len(log)
		for msg := range batch.Messages() {
			if log, err = appendRecord(log, msg); err != nil {
				return nil, err
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("read %s after seq %d: %w", events.Stream, len(log), err)
		}
		if len(log) == n {
			return nil, fmt.Errorf("read %s: nothing after seq %d of %d", events.Stream, n, last)
		}
	}
	return log[:last], nil
}

// appendRecord decodes one message, refusing a gap.
func appendRecord(log []Record, msg jetstream.Msg) ([]Record, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("message metadata: %w", err)
	}
	seq := meta.Sequence.Stream
	if want := uint64(len(log)) + 1; seq != want {
		return nil, fmt.Errorf("gap in %s: seq %d where %d was due", events.Stream, seq, want)
	}
	ev, err := bus.Decode(msg)
	if err != nil {
		return nil, fmt.Errorf("seq %d: %w", seq, err)
	}
	return append(log, Record{Seq: seq, Event: ev, Stored: meta.Timestamp}), nil
}
