package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// errStillThere means a sequence the reader did not receive is still in
// the stream: the read went wrong and must start again.
var errStillThere = errors.New("a sequence the read passed over is still in the stream")

// reader reads JQ_EVENTS in order from a sequence, turning what it
// receives into records that account for every sequence: events, and
// spans the stream confirmed it no longer holds. Its consumer (a
// bus.Reader's) is ephemeral: a reader is dropped by forgetting it, and the
// server removes the consumer once unused.
type reader struct {
	stream jetstream.Stream
	cons   *bus.Reader
	// next is the first sequence not yet accounted for.
	next uint64
	max  int
}

func newReader(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, from uint64, batch int) (*reader, error) {
	cons, err := bus.NewReader(ctx, js, events.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return nil, fmt.Errorf("read %s from %d: %w", events.Stream, from, err)
	}
	return &reader{stream: s, cons: cons, next: from, max: batch}, nil
}

// entry is one record of a batch and what is needed to park it.
type entry struct {
	rec     store.Record
	typ     string
	subject string
	raw     []byte
}

// park sets the entry aside as unstorable.
func (e *entry) park(why error) {
	e.rec.Parked = &store.Parked{Type: e.typ, Subject: e.subject, Data: e.raw, Reason: why.Error()}
}

// read returns the next records: what is there now (up to max), or what
// arrives within idleWait; none when the projection is at the end.
func (r *reader) read(ctx context.Context) ([]entry, error) {
	msgs, err := bus.Batch(ctx, r.cons, r.max, idleWait)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return r.expired(ctx)
	}
	out := make([]entry, 0, len(msgs)+1)
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("message metadata: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq < r.next {
			continue
		}
		if seq > r.next {
			if err := r.confirmGone(ctx, r.next, seq-1); err != nil {
				return nil, err
			}
			out = append(out, entry{rec: store.Record{Seq: r.next, Gone: seq - r.next}})
		}
		out = append(out, received(m, seq))
		r.next = seq + 1
	}
	return out, nil
}

// received makes a message a record: its event, or parked when it does
// not decode (it never will).
func received(m jetstream.Msg, seq uint64) entry {
	e := entry{rec: store.Record{Seq: seq}, typ: m.Headers().Get(events.HeaderType), subject: m.Subject(), raw: m.Data()}
	ev, err := bus.Decode(m)
	if err != nil {
		e.park(fmt.Errorf("does not decode: %w", err))
		return e
	}
	e.rec.Event, e.rec.Raw = ev, e.raw
	return e
}

// confirmGone checks that the stream no longer holds the sequences from
// through to, which the reader passed over to deliver to+1: the first
// message the stream holds at or after from must come after to. A direct
// get may be answered by a replica behind the leader; one that answers at
// all has to+1 in order, so it cannot hold a message before it that the
// leader does not. "Not found" proves nothing (that replica may not have
// reached to+1), and the read starts again.
func (r *reader) confirmGone(ctx context.Context, from, to uint64) error {
	m, err := r.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(">"))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("sequences %d-%d: no message at or after %d yet: %w", from, to, from, errStillThere)
	case err != nil:
		return fmt.Errorf("confirm sequences %d-%d are gone: %w", from, to, err)
	case m.Sequence <= to:
		return fmt.Errorf("sequence %d: %w", m.Sequence, errStillThere)
	}
	return nil
}

// expired accounts for what the stream's limits removed beyond the last
// event read when nothing follows it: sequences below the stream's first
// are gone (limits and purges remove the oldest). A message deleted at
// the very end by hand is accounted for when the next event arrives.
func (r *reader) expired(ctx context.Context) ([]entry, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	first := info.State.FirstSeq
	if first <= r.next {
		return nil, nil
	}
	gone := entry{rec: store.Record{Seq: r.next, Gone: first - r.next}}
	r.next = first
	return []entry{gone}, nil
}
