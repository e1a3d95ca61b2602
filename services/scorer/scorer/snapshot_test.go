package scorer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

type snapEnv struct {
	t   *testing.T
	ctx context.Context
	js  jetstream.JetStream
	n   int
}

func (e *snapEnv) publish(typ events.Type, subject string, data any) {
	e.t.Helper()
	e.n++
	ev := events.Event{ID: fmt.Sprint("ev-", e.n), Type: typ, Source: "test", Time: time.Date(2026, 1, 1, 0, 0, e.n, 0, time.UTC),
		Subject: subject, Data: data}.FromOwner()
	if _, _, err := bus.Publish(e.ctx, e.js, ev, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *snapEnv) submit(name string) {
	ref := events.WorkloadRef{Namespace: "ns", Name: name}
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
		"spec":{"queueName":"lq","podSets":[{"name":"main","count":2,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"1Gi"}}}]}}}]}}`, name)
	e.publish(events.WorkloadSubmitted, events.WorkloadSubject("ns", name), &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(wl)})
	e.publish(events.QuotaReserved, events.WorkloadSubject("ns", name), &events.QuotaReservedData{WorkloadRef: ref,
		Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 2,
			Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "rf"}, Usage: map[corev1.ResourceName]int64{corev1.ResourceCPU: 2000}}}}})
}

func (e *snapEnv) lastSeq() uint64 {
	s, err := e.js.Stream(e.ctx, events.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// fold applies the log up to seq to a fresh State and encodes it.
func (e *snapEnv) fold(seq uint64) []byte {
	s, err := e.js.Stream(e.ctx, events.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	st := NewState()
	for n := uint64(1); n <= seq; n++ {
		m, err := s.GetMsg(e.ctx, n)
		if err != nil {
			e.t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		_ = st.Apply(ev)
	}
	out, err := st.encode()
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// follow runs a follower with a writer of policy until stop.
func (e *snapEnv) follow(policy snapshot.Policy, m *snapshot.Metrics) (*follower, *snapshot.Store, func()) {
	store, err := snapshot.Open(e.ctx, e.js, snapshot.Options{Name: SnapshotName, Version: snapshotVersion, Metrics: m})
	if err != nil {
		e.t.Fatal(err)
	}
	w := &snapshot.Writer{Store: store, Policy: policy}
	f := newFollower(func(uint64, string, error) {})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- f.run(ctx, e.js, w) }()
	return f, store, func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
		w.Wait()
	}
}

// TestFollowerSnapshotIsTheFold: the follower's snapshot is exactly the
// fold of the log up to its sequence; a new follower restores it, reads
// only the events after it, and ends in the state of the whole log.
func TestFollowerSnapshotIsTheFold(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := bus.Connect(srv.ClientURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bus.EnsureStream(ctx, js, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &snapEnv{t: t, ctx: ctx, js: js}
	e.publish(events.ConfigApplied, events.ConfigSubject("ResourceFlavor", "", "rf"), &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: "ResourceFlavor", Name: "rf"},
		Object:    json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"},"spec":{"nodeLabels":{"pool":"a"}}}`)})
	for i := range 3 {
		e.submit(fmt.Sprint("w", i))
	}
	_, store, stop := e.follow(snapshot.Policy{Events: 1}, nil)
	var sn *snapshot.Snapshot
	testenv.Eventually(t, "a snapshot of the whole log", 10*time.Second, func() error {
		sn, err = store.Load(ctx)
		if err != nil || sn == nil || sn.Seq != e.lastSeq() {
			return fmt.Errorf("no snapshot at %d yet (%v)", e.lastSeq(), err)
		}
		return nil
	})
	stop()
	if sn.Seq != 7 {
		t.Fatalf("snapshot at %d, want 7", sn.Seq)
	}
	if want := e.fold(sn.Seq); string(sn.Payload) != string(want) {
		t.Fatalf("the snapshot is not the fold:\n%s\nwant\n%s", sn.Payload, want)
	}
	// The tail: one finishes, one is evicted, one more comes.
	e.publish(events.WorkloadFinished, events.WorkloadSubject("ns", "w0"), &events.WorkloadFinishedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: "w0"}})
	e.publish(events.Evicted, events.WorkloadSubject("ns", "w1"), &events.EvictedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: "w1"}, Reason: "Preempted"})
	e.submit("w3")
	last := e.lastSeq()
	m := snapshot.NewMetrics(prometheus.NewRegistry(), "scorer")
	f, _, stop := e.follow(snapshot.Policy{}, m)
	defer stop()
	if err := f.waitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got, _ := f.state.encode()
	f.mu.Unlock()
	if want := e.fold(last); string(got) != string(want) {
		t.Fatalf("restored and followed:\n%s\nwant the whole log's\n%s", got, want)
	}
	if n := testutil.ToFloat64(m.Restores); n != 1 {
		t.Fatalf("restores = %v, want 1", n)
	}
}
