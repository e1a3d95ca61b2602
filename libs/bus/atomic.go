package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetqueue/jetqueue/libs/events"
)

// MaxAtomic is the most events one atomic batch may hold: nats-server's
// default limit (jetstream.max_batch_size, streamDefaultMaxAtomicBatchSize
// in server/stream.go).
const MaxAtomic = 1000

// Write is one event of an atomic batch and its fence: with ExpectLast
// set, the batch is stored only if the last message on the event's
// subject has that sequence (0: the subject is empty).
type Write struct {
	Event      events.Event
	ExpectLast *uint64
}

// ErrDuplicateInBatch means an event of an atomic batch has the id of one
// already in the stream (within its dedupe window), so the batch was not
// stored: JetStream refuses such a batch whole rather than dropping the
// duplicate from it.
var ErrDuplicateInBatch = errors.New("an event of the batch is already in the stream")

// Headers of JetStream's atomic batch publish (nats-server 2.12+).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// codeDuplicateInBatch is JSAtomicPublishContainsDuplicateMessageErr.
const codeDuplicateInBatch jetstream.ErrorCode = 10201

// atomicRequestTimeout bounds each message's round trip when the caller's
// context has no deadline of its own.
const atomicRequestTimeout = 5 * time.Second

// PublishAtomic stores the writes as one JetStream atomic batch: all of
// them, contiguously and in order, or none. Every fence is checked
// against the stream as it is when the batch commits; a failed one
// refuses the whole batch with ErrConflict. JetStream allows one fence
// only on a subject's first write in a batch, so a later fenced write on
// the same subject is refused before anything is sent. It returns each write's stream sequence.
func PublishAtomic(ctx context.Context, js jetstream.JetStream, writes []Write) ([]uint64, error) {
	if err := checkAtomic(writes); err != nil {
		return nil, err
	}
	id := nuid.Next()
	for i, w := range writes {
		msg, err := message(w.Event, w.ExpectLast)
		if err != nil {
			return nil, err
		}
		msg.Header.Set(hdrBatchID, id)
		msg.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		last := i == len(writes)-1
		if last {
			msg.Header.Set(hdrBatchCommit, "1")
		}
		rctx, cancel := requestContext(ctx)
		reply, err := js.Conn().RequestMsgWithContext(rctx, msg)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("publish batch of %d, event %d (%s on %s): %w", len(writes), i+1, w.Event.Type, w.Event.Subject, err)
		}
		// JetStream answers each staged message with an empty body, and
		// the commit with the batch's acknowledgement; an error can come
		// at any step, and nothing of the batch is stored then.
		if !last && len(reply.Data) == 0 {
			continue
		}
		seq, err := batchAck(reply.Data, len(writes))
		if err != nil {
			return nil, err
		}
		if !last {
			return nil, fmt.Errorf("publish batch of %d: JetStream acknowledged it at event %d", len(writes), i+1)
		}
		seqs := make([]uint64, len(writes))
		for j := range seqs {
			seqs[j] = seq - uint64(len(writes)-1-j)
		}
		return seqs, nil
	}
	return nil, nil
}

// checkAtomic refuses what JetStream would refuse: too many writes, or a
// fenced write on a subject an earlier write of the batch touches (its
// fence could only be checked against the stream before the batch).
func checkAtomic(writes []Write) error {
	if len(writes) > MaxAtomic {
		return fmt.Errorf("atomic batch of %d events: at most %d", len(writes), MaxAtomic)
	}
	seen := make(map[string]bool, len(writes))
	for _, w := range writes {
		if seen[w.Event.Subject] && w.ExpectLast != nil {
			return fmt.Errorf("atomic batch: a fenced event on %s after another event on it", w.Event.Subject)
		}
		seen[w.Event.Subject] = true
	}
	return nil
}

func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, atomicRequestTimeout)
}

// batchAck reads JetStream's answer to a batch message: the sequence of
// its last event, or the error that refused the batch.
func batchAck(data []byte, n int) (uint64, error) {
	var ack struct {
		Error    *jetstream.APIError `json:"error"`
		Sequence uint64              `json:"seq"`
		Count    int                 `json:"count"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return 0, fmt.Errorf("publish batch of %d: unreadable acknowledgement: %w", n, err)
	}
	switch {
	case ack.Error != nil && isConflict(ack.Error):
		return 0, fmt.Errorf("publish batch of %d: %w", n, ErrConflict)
	case ack.Error != nil && ack.Error.ErrorCode == codeDuplicateInBatch:
		return 0, fmt.Errorf("publish batch of %d: %w", n, ErrDuplicateInBatch)
	case ack.Error != nil:
		return 0, fmt.Errorf("publish batch of %d: %w", n, ack.Error)
	case ack.Count != n || ack.Sequence < uint64(n):
		return 0, fmt.Errorf("publish batch of %d: JetStream stored %d ending at %d", n, ack.Count, ack.Sequence)
	}
	return ack.Sequence, nil
}
