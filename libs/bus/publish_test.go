package bus

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestPublishAsyncWaitsForRoom: when as many publications as the
// connection allows are awaiting their acknowledgement (a server slow
// under load), the next PublishAsync waits for room instead of failing.
// A failure there made admission restart and replay its log in the
// middle of a run, at 1,000 workloads a second, which put it 25 s
// behind. The acknowledgements here come from a responder that answers
// each 300 ms late, longer than nats.go waits for room by default.
func TestPublishAsyncWaitsForRoom(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := Connect(srv.ClientURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var seq atomic.Uint64
	sub, err := nc.Subscribe("slow.>", func(m *nats.Msg) {
		n := seq.Add(1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_ = m.Respond(fmt.Appendf(nil, `{"stream":"SLOW","seq":%d}`, n))
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 6
	var sent []jetstream.PubAckFuture
	var evs []events.Event
	for i := range n {
		ev := events.Event{ID: fmt.Sprint("e", i), Type: events.PodsReady, Source: "test", Time: time.Now(), Subject: "slow.x",
			Data: &events.WorkloadRef{Namespace: "ns", Name: "w"}}
		f, err := PublishAsync(js, ev, nil)
		if err != nil {
			t.Fatalf("publication %d of %d: %v", i+1, n, err)
		}
		sent, evs = append(sent, f), append(evs, ev)
	}
	got := map[uint64]bool{}
	for i, f := range sent {
		s, _, err := Result(ctx, evs[i], f)
		if err != nil {
			t.Fatalf("publication %d: %v", i+1, err)
		}
		got[s] = true
	}
	if len(got) != n {
		t.Fatalf("%d distinct acknowledgements, want %d", len(got), n)
	}
}
