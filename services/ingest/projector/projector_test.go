package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/embedded"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is one event stream and one projection database.
type env struct {
	t      *testing.T
	url    string
	db     string
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	ttl    time.Duration
	mu     sync.Mutex
	n      int
}

func newEnv(t *testing.T, db string) *env {
	t.Helper()
	srv := testenv.NATS(t)
	e := &env{t: t, url: srv.ClientURL(), db: db}
	conn := e.connect("publisher")
	e.js, e.stream = conn.JS, conn.Stream
	var err error
	if e.kv, e.ttl, err = bus.EnsureLeaseBucket(t.Context(), e.js, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	e.publish(events.Event{Type: events.ConfigApplied, Subject: events.ConfigSubject("LocalQueue", "ns", "lq"),
		Data: &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "LocalQueue", Namespace: "ns", Name: "lq"},
			Object: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)}})
	return e
}

func (e *env) connect(name string) *bus.Conn {
	e.t.Helper()
	conn, err := bus.Open(context.Background(), e.url, name, bus.StreamOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(conn.Close)
	return conn
}

// publish appends an event to JQ_EVENTS and returns its sequence.
func (e *env) publish(ev events.Event) uint64 {
	e.t.Helper()
	e.mu.Lock()
	e.n++
	ev.ID, ev.Source, ev.Time = fmt.Sprint("ev-", e.n), "test", t0.Add(time.Duration(e.n)*time.Millisecond)
	e.mu.Unlock()
	seq, _, err := bus.Publish(context.Background(), e.js, ev, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

func (e *env) submit(name string) uint64 {
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},"spec":{"queueName":"lq","podSets":[]}}`, name)
	return e.publish(events.Event{Type: events.WorkloadSubmitted, Subject: events.WorkloadSubject("ns", name),
		Data: &events.WorkloadSubmittedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: name}, Workload: json.RawMessage(wl), CreatedAt: t0}})
}

// raw publishes a message straight into the stream, as any NATS client
// could: valid CloudEvent headers, any body.
func (e *env) raw(typ, subject string, body []byte) uint64 {
	e.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	e.mu.Lock()
	e.n++
	id := fmt.Sprint("raw-", e.n)
	e.mu.Unlock()
	for k, v := range (events.Event{ID: id, Type: events.Type(typ), Source: "test", Time: t0, Subject: subject}).FromOwner().Headers() {
		m.Header.Set(k, v)
	}
	ack, err := e.js.PublishMsg(context.Background(), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// runner is one projector instance, as one ingest would run it.
type runner struct {
	rt   *service.Runtime
	reg  *prometheus.Registry
	stop func()
}

func (e *env) start(name string, st *store.Store) *runner {
	e.t.Helper()
	conn := e.connect(name)
	r := &runner{reg: prometheus.NewRegistry()}
	r.rt = &service.Runtime{Name: name, Log: zaptest.NewLogger(e.t).Named(name), Registry: r.reg}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{JS: conn.JS, Stream: conn.Stream, Store: st, Log: r.rt.Log, Skip: r.rt.Skip, Registerer: r.reg,
			Leader: bus.NewLeadership(e.kv, LeaseKey, name, e.ttl), Batch: 50, Standby: 100 * time.Millisecond})
	}()
	once := sync.Once{}
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("%s: %v", name, err)
			}
		})
	}
	e.t.Cleanup(r.stop)
	return r
}

func (r *runner) applied() int  { return r.metric("jetqueue_projection_events_applied_total") }
func (r *runner) failures() int { return r.metric("jetqueue_projection_batch_failures_total") }

// metric sums a counter of the runner's registry over its labels.
func (r *runner) metric(name string) int {
	fams, _ := r.reg.Gather()
	v := 0.0
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return int(v)
}

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// caughtUp waits until the projection is at the stream's last sequence.
func (e *env) caughtUp(st *store.Store, within time.Duration) {
	e.t.Helper()
	testenv.Eventually(e.t, "the projection reaches the stream's end", within, func() error {
		info, err := e.stream.Info(context.Background())
		if err != nil {
			return err
		}
		last, err := st.LastSeq(context.Background())
		if err != nil {
			return err
		}
		if last != info.State.LastSeq {
			return fmt.Errorf("projection at %d, stream at %d", last, info.State.LastSeq)
		}
		return nil
	})
}

// equalsLog checks the projection against the log itself: every
// submission in the stream is a workload row exactly once, and the
// history holds exactly the stream's workload events, each at its own
// sequence with the payload the stream holds there.
func (e *env) equalsLog(st *store.Store) {
	e.t.Helper()
	ctx := context.Background()
	var wantSeqs []int64
	var wantNames []string
	wantData := map[int64]any{}
	cons, err := e.js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := e.stream.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for seq := uint64(0); seq < info.State.LastSeq; {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			e.t.Fatalf("reading the log after %d: %v", seq, err)
		}
		meta, _ := m.Metadata()
		seq = meta.Sequence.Stream
		ev, err := bus.Decode(m)
		if err != nil || ev.Type == events.ConfigApplied {
			continue
		}
		wantSeqs = append(wantSeqs, int64(seq))
		wantData[int64(seq)] = jsonValue(e.t, m.Data())
		if d, ok := ev.Data.(*events.WorkloadSubmittedData); ok {
			wantNames = append(wantNames, d.Name)
		}
	}
	var gotSeqs []int64
	rows, _ := st.Pool.Query(ctx, `SELECT seq, data FROM workload_events ORDER BY seq`)
	for rows.Next() {
		var s int64
		var data []byte
		_ = rows.Scan(&s, &data)
		gotSeqs = append(gotSeqs, s)
		if want, ok := wantData[s]; ok {
			if d := cmp.Diff(want, jsonValue(e.t, data)); d != "" {
				e.t.Errorf("history's payload at %d against the log's (-log +projection):\n%s", s, d)
			}
		}
	}
	if rows.Err() != nil {
		e.t.Fatal(rows.Err())
	}
	if d := cmp.Diff(wantSeqs, gotSeqs); d != "" {
		e.t.Errorf("history against the log (-log +projection):\n%s", d)
	}
	var gotNames []string
	rows, _ = st.Pool.Query(ctx, `SELECT name FROM workloads`)
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		gotNames = append(gotNames, n)
	}
	slices.Sort(wantNames)
	slices.Sort(gotNames)
	if d := cmp.Diff(wantNames, gotNames); d != "" {
		e.t.Errorf("workloads against the log's submissions (-log +projection):\n%s", d)
	}
}

// jsonValue decodes a JSON document for comparing by value, as jsonb
// keeps it.
func jsonValue(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	return v
}

// load publishes n submissions named prefix-i, one every gap.
func (e *env) load(prefix string, n int, gap time.Duration) {
	for i := range n {
		e.submit(fmt.Sprintf("%s-%03d", prefix, i))
		time.Sleep(gap)
	}
}

// TestTwoInstancesOneWriterInOrder: two projectors on one stream and one
// database under a steady load. Only the lease holder writes; when it
// stops, the standby takes over from the stored position; the
// projection ends equal to the log, every event written once.
func TestTwoInstancesOneWriterInOrder(t *testing.T) {
	e := newEnv(t, testenv.Postgres(t))
	stA, stB := openStore(t, e.db), openStore(t, e.db)
	a := e.start("a", stA)
	testenv.Eventually(t, "a takes the lease", 10*time.Second, func() error {
		if a.applied() == 0 {
			return errors.New("a has applied nothing")
		}
		return nil
	})
	b := e.start("b", stB)
	e.load("first", 200, 2*time.Millisecond)
	e.caughtUp(stA, 30*time.Second)
	if got := b.applied(); got != 0 {
		t.Fatalf("the standby wrote %d events while the lease holder ran; want 0", got)
	}
	a.stop()
	var wg sync.WaitGroup
	wg.Go(func() { e.load("second", 200, 2*time.Millisecond) })
	wg.Wait()
	e.caughtUp(stB, 30*time.Second)
	e.equalsLog(stB)
	info, _ := e.stream.Info(t.Context())
	if got, want := a.applied()+b.applied(), int(info.State.LastSeq); got != want {
		t.Errorf("events written %d (a %d, b %d), want each of the %d once", got, a.applied(), b.applied(), want)
	}
	if b.applied() == 0 {
		t.Errorf("the standby never took over")
	}
}

// TestPostgresHardStopLosesNothing: PostgreSQL is stopped hard (no
// checkpoint, connections cut) while events flow, and started again on
// the same port and data: the projection ends equal to the log.
func TestPostgresHardStopLosesNothing(t *testing.T) {
	dir, err := os.MkdirTemp("", "jq-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	admin, stop, err := embedded.StartPostgresOn(t.Context(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	t.Cleanup(func() { stop() })
	e := newEnv(t, admin)
	st := openStore(t, admin)
	r := e.start("a", st)
	var wg sync.WaitGroup
	wg.Go(func() { e.load("w", 300, 10*time.Millisecond) })
	time.Sleep(time.Second)
	stop()
	time.Sleep(2 * time.Second)
	if _, stop, err = embedded.StartPostgresOn(t.Context(), dir, port); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	e.caughtUp(st, 60*time.Second)
	e.equalsLog(st)
	if r.failures() == 0 {
		t.Errorf("no batch failed: the outage was not exercised")
	}
}

// TestPoisonEventIsParkedAndTheRestProjected: events written straight
// into JQ_EVENTS that the database refuses (a NUL in a jsonb string) or
// that do not decode are parked, each once, visibly (parked_events,
// jetqueue_events_skipped_total, the runtime's /readyz detail), and the
// events after them are projected.
func TestPoisonEventIsParkedAndTheRestProjected(t *testing.T) {
	e := newEnv(t, testenv.Postgres(t))
	st := openStore(t, e.db)
	e.submit("before")
	nul := e.raw(string(events.WorkloadSubmitted), events.WorkloadSubject("ns", "poison"),
		[]byte(`{"namespace":"ns","name":"poison","createdAt":"2026-01-01T00:00:00Z","workload":{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"poison","namespace":"ns","annotations":{"a":"\u0000"}},"spec":{"queueName":"lq","podSets":[]}}}`))
	garbled := e.raw(string(events.WorkloadFinished), events.WorkloadSubject("ns", "before"), []byte(`{"namespace":`))
	for i := range 20 {
		e.submit(fmt.Sprint("after-", i))
	}
	r := e.start("a", st)
	e.caughtUp(st, 30*time.Second)
	parked, err := st.ParkedEvents(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, p := range parked {
		seqs = append(seqs, p.Seq)
	}
	if d := cmp.Diff([]uint64{nul, garbled}, seqs); d != "" {
		t.Errorf("parked events (-want +got):\n%s", d)
	}
	if n, last := r.rt.Skipped(); n != 2 || !strings.Contains(last, fmt.Sprint("seq ", garbled)) {
		t.Errorf("runtime skipped %d, last %q; want 2, the last at %d", n, last, garbled)
	}
	if got := r.metric("jetqueue_events_skipped_total"); got != 2 {
		t.Errorf("jetqueue_events_skipped_total %d, want 2", got)
	}
	if got := r.applied(); got != 24 {
		t.Errorf("events written %d, want 24 (config, 21 submissions, 2 parked)", got)
	}
	views, _, err := st.ListWorkloads(t.Context(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 21 {
		t.Errorf("%d workloads projected, want 21 (all but the poison)", len(views))
	}
}

// TestDeletedSequencesArePassedOnlyWhenGone: sequences the stream no
// longer holds (the oldest purged, one deleted by hand) are accounted for
// and passed over; a sequence the stream still holds is never passed over.
func TestDeletedSequencesArePassedOnlyWhenGone(t *testing.T) {
	e := newEnv(t, testenv.Postgres(t))
	st := openStore(t, e.db)
	for i := range 10 {
		e.submit(fmt.Sprint("old-", i))
	}
	// Limits remove the oldest: 1-6 (the LocalQueue and five workloads).
	if err := e.stream.Purge(t.Context(), jetstream.WithPurgeSequence(7)); err != nil {
		t.Fatal(err)
	}
	kept := e.submit("kept")
	deleted := e.submit("deleted")
	e.submit("last")
	if err := e.stream.DeleteMsg(t.Context(), deleted); err != nil {
		t.Fatal(err)
	}
	conn := e.connect("reader")
	// A sequence still in the stream is not gone, whatever a reader saw.
	r := &reader{stream: conn.Stream}
	if err := r.confirmGone(t.Context(), kept, kept); !errors.Is(err, errStillThere) {
		t.Errorf("confirming %d (still there) gone: %v, want errStillThere", kept, err)
	}
	if err := r.confirmGone(t.Context(), deleted, deleted); err != nil {
		t.Errorf("confirming %d (deleted) gone: %v", deleted, err)
	}
	e.start("a", st)
	e.caughtUp(st, 30*time.Second)
	views, _, err := st.ListWorkloads(t.Context(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range views {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	if d := cmp.Diff([]string{"kept", "last", "old-5", "old-6", "old-7", "old-8", "old-9"}, names); d != "" {
		t.Errorf("projected workloads (-want +got):\n%s", d)
	}
}
