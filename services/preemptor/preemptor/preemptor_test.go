package preemptor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestEvictsOnlyVictimsUnchangedSinceChosen pins the fence: a request
// naming a victim at its current sequence evicts it (once, even when the
// request is delivered again); a victim that changed after it was chosen
// is left alone.
func TestEvictsOnlyVictimsUnchangedSinceChosen(t *testing.T) {
	ctx, srv, conn, publish := testLog(t)
	ref := func(name string) events.WorkloadRef { return events.WorkloadRef{Namespace: "ns", Name: name} }
	subject := func(name string) string { return events.WorkloadSubject("ns", name) }
	steady := publish(subject("steady"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("steady")})
	moved := publish(subject("moved"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("moved")})
	// "moved" becomes ready after admission chose it.
	publish(subject("moved"), events.PodsReady, &events.WorkloadRef{Namespace: "ns", Name: "moved"})
	req := &events.PreemptionRequestedData{WorkloadRef: ref("high"), ClusterQueue: "cq", Victims: []events.Victim{
		{WorkloadRef: ref("steady"), ClusterQueue: "cq", Seq: steady},
		{WorkloadRef: ref("moved"), ClusterQueue: "cq", Seq: moved},
	}}
	publish(subject("high"), events.PreemptionRequested, req)

	stop := run(t, srv.ClientURL(), "a")
	waitProgress(t, ctx, conn.JS, 4)
	stop()
	// Delivered again: a new instance sees the request as if unacknowledged.
	if err := conn.JS.DeleteConsumer(ctx, events.Stream, Durable); err != nil {
		t.Fatal(err)
	}
	kv, err := conn.JS.KeyValue(ctx, bus.ProgressBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "preemptor"); err != nil {
		t.Fatal(err)
	}
	stop = run(t, srv.ClientURL(), "b")
	waitProgress(t, ctx, conn.JS, 5)
	stop()

	evicted := map[string]int{}
	for seq := uint64(1); ; seq++ {
		m, err := conn.Stream.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := ev.Data.(*events.EvictedData); ok {
			evicted[d.Name]++
			if d.Reason != "Preempted" || d.Preemptor == nil || d.Preemptor.Name != "high" || !ev.Time.Equal(t0) {
				t.Errorf("eviction %+v at %v, want reason Preempted by high at the request's time", d, ev.Time)
			}
		}
	}
	if evicted["steady"] != 1 || evicted["moved"] != 0 {
		t.Errorf("evictions %v, want steady once and moved never", evicted)
	}
}

// testLog starts a NATS server with JQ_EVENTS and returns a publisher of
// test events (each with the next id) and what the test needs besides.
func testLog(t *testing.T) (context.Context, *server.Server, *bus.Conn, func(subject string, typ events.Type, data any) uint64) {
	srv := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	conn, err := bus.Open(ctx, srv.ClientURL(), "test", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	n := 0
	return ctx, srv, conn, func(subject string, typ events.Type, data any) uint64 {
		t.Helper()
		n++
		seq, _, err := bus.Publish(ctx, conn.JS, events.Event{ID: fmt.Sprint("test-", n), Type: typ, Source: "test", Time: t0,
			Subject: subject, Data: data}.FromOwner(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
}

func run(t *testing.T, url, instance string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "preemptor", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: url, Shard: "preemptor-0", Instance: instance, LeaseTTL: time.Second}})
			})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", instance, err)
		}
	}
}

// waitProgress waits until the preemptor reports having handled seq.
func waitProgress(t *testing.T, ctx context.Context, js jetstream.JetStream, seq uint64) {
	t.Helper()
	for {
		if got, _ := bus.ReadProgress(ctx, js, "preemptor"); got >= seq {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the preemptor did not reach sequence %d", seq)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTakesOverAnAcknowledgedButUnreportedPosition: a leader that stopped
// after acknowledging a batch but before reporting it leaves nothing to be
// delivered again; its successor reports the consumer's position, so
// /v1/sync, which waits on the mark, does not wait for ever.
func TestTakesOverAnAcknowledgedButUnreportedPosition(t *testing.T) {
	srv := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := bus.Open(ctx, srv.ClientURL(), "test", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 7
	for i := range n {
		name := fmt.Sprint("w", i)
		if _, _, err := bus.Publish(ctx, conn.JS, events.Event{ID: fmt.Sprint("test-", i), Type: events.QuotaReserved,
			Source: "test", Time: t0, Subject: events.WorkloadSubject("ns", name),
			Data: &events.QuotaReservedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: name}}}.FromOwner(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The predecessor: registered, consumed and acknowledged all seven,
	// stopped before reporting.
	if _, err := bus.NewProgress(ctx, conn.JS, "preemptor"); err != nil {
		t.Fatal(err)
	}
	cons, err := bus.EnsureConsumer(ctx, conn.Stream, consumerOptions)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var last jetstream.Msg
	got := 0
	for m := range msgs.Messages() {
		last = m
		got++
	}
	if got != n {
		t.Fatalf("fetched %d events, want %d", got, n)
	}
	if err := last.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	stop := run(t, srv.ClientURL(), "successor")
	defer stop()
	waitProgress(t, ctx, conn.JS, n)
}

// TestCarriesOutARequestItsPredecessorFetchedButNeverAcknowledged: a
// leader killed after fetching a PreemptionRequested and before
// acknowledging it leaves the request delivered and pending on the
// durable consumer. Its successor must carry it out, even when a later
// event arrives first: the consumer acknowledges everything up to what it
// acknowledges, so handling the later one without the request would
// acknowledge the request unhandled, and admission would wait for its
// evictions for ever.
func TestCarriesOutARequestItsPredecessorFetchedButNeverAcknowledged(t *testing.T) {
	ctx, srv, conn, publishOn := testLog(t)
	publish := func(name string, typ events.Type, data any) uint64 {
		t.Helper()
		return publishOn(events.WorkloadSubject("ns", name), typ, data)
	}
	ref := func(name string) events.WorkloadRef { return events.WorkloadRef{Namespace: "ns", Name: name} }
	victim := publish("victim", events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("victim")})
	publish("high", events.PreemptionRequested, &events.PreemptionRequestedData{WorkloadRef: ref("high"), ClusterQueue: "cq",
		Victims: []events.Victim{{WorkloadRef: ref("victim"), ClusterQueue: "cq", Seq: victim}}})

	// The predecessor fetched both and was killed before acknowledging.
	if _, err := bus.NewProgress(ctx, conn.JS, "preemptor"); err != nil {
		t.Fatal(err)
	}
	cons, err := bus.EnsureConsumer(ctx, conn.Stream, consumerOptions)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for range msgs.Messages() {
		fetched++
	}
	if fetched != 2 {
		t.Fatalf("fetched %d events, want 2", fetched)
	}

	stop := run(t, srv.ClientURL(), "successor")
	defer stop()
	later := publish("other", events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("other")})
	waitProgress(t, ctx, conn.JS, later)
	// The request's own acknowledgement wait (10s) has not passed: the
	// eviction is there already, and exactly once.
	evictions := 0
	for seq := uint64(1); ; seq++ {
		m, err := conn.Stream.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		if m.Header.Get(events.HeaderType) == string(events.Evicted) {
			evictions++
		}
	}
	if evictions != 1 {
		t.Fatalf("%d evictions of the victim once the successor handled event %d, want 1", evictions, later)
	}
}
