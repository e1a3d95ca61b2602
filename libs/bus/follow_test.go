package bus

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// slowConsumer is a real consumer whose first fetches come back empty,
// as they do when a loaded server does not deliver within the wait.
type slowConsumer struct {
	jetstream.Consumer
	empty int
}

type noMessages struct{}

func (noMessages) Messages() <-chan jetstream.Msg {
	c := make(chan jetstream.Msg)
	close(c)
	return c
}
func (noMessages) Error() error { return nil }

func (c *slowConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	if c.empty > 0 {
		return noMessages{}, nil
	}
	return c.Consumer.FetchNoWait(n)
}

func (c *slowConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if c.empty > 0 {
		c.empty--
		return noMessages{}, nil
	}
	return c.Consumer.Fetch(n, opts...)
}

// TestFollowTellsAnEmptyFetchFromTheEnd: a fetch that comes back empty
// while the stream still holds events is not the end of the log (a
// decider taking it for the end would decide on part of the log); once
// every event is read, an empty fetch is.
func TestFollowTellsAnEmptyFetchFromTheEnd(t *testing.T) {
	ctx, js, s := setup(t)
	const n = 5
	for i := range n {
		if _, _, err := Publish(ctx, js, podsReady(fmt.Sprint("id-", i), "ns", fmt.Sprint("w", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	real, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := &slowConsumer{Consumer: real, empty: 2}
	var last uint64
	var ends []bool
	for range 5 {
		msgs, end, err := Follow(ctx, c, 2, 50*time.Millisecond, last)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			last = meta.Sequence.Stream
		}
		ends = append(ends, end)
	}
	// Two empty fetches over five events, then 2+2+1 events: only the
	// batch reaching the fifth is the end.
	if fmt.Sprint(ends) != "[false false false false true]" || last != n {
		t.Errorf("caught up after each call %v, read up to %d; want [false false false false true] and %d", ends, last, n)
	}
	msgs, end, err := Follow(ctx, c, 2, 50*time.Millisecond, last)
	if err != nil || len(msgs) != 0 || !end {
		t.Errorf("at the end: %d messages, caught up %v, err %v; want none, true, nil", len(msgs), end, err)
	}
}
