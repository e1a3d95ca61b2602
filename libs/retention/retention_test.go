package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestExpiryTrustsTheLogNotTheProjection: the projection names the
// finished candidates, but it may lag the log. A workload the projection
// shows finished that the log has since deleted and submitted again under
// the same name is live: it must not expire. One finished in both does,
// exactly once.
func TestExpiryTrustsTheLogNotTheProjection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(testenv.NATS(t).ClientURL(), "retention-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := bus.EnsureStream(ctx, js, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	n := 0
	publish := func(typ events.Type, name string, data any) events.Event {
		t.Helper()
		n++
		ev := events.Event{ID: fmt.Sprintf("ev-%d", n), Type: typ, Source: events.SourceIngest, Time: t0.Add(time.Duration(n) * time.Second),
			Subject: events.WorkloadSubject("team", name), Data: data}
		if _, _, err := bus.Publish(ctx, js, ev, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	submitted := func(name string) any {
		wl, _ := json.Marshal(map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
			"metadata": map[string]any{"name": name, "namespace": "team"}, "spec": map[string]any{"queueName": "lq"}})
		return &events.WorkloadSubmittedData{WorkloadRef: events.WorkloadRef{Namespace: "team", Name: name}, Workload: wl, CreatedAt: t0}
	}
	finished := func(name string) any {
		return &events.WorkloadFinishedData{WorkloadRef: events.WorkloadRef{Namespace: "team", Name: name}, Succeeded: true}
	}
	var projected []store.Record
	for _, name := range []string{"moved", "done"} {
		ev := publish(events.WorkloadSubmitted, name, submitted(name))
		projected = append(projected, store.Record{Seq: uint64(n), Event: ev})
		ev = publish(events.WorkloadFinished, name, finished(name))
		projected = append(projected, store.Record{Seq: uint64(n), Event: ev})
	}
	if _, err := st.Apply(ctx, projected); err != nil {
		t.Fatal(err)
	}
	// The log moves on; the projection has not seen it yet.
	publish(events.WorkloadDeleted, "moved", &events.WorkloadRef{Namespace: "team", Name: "moved"})
	publish(events.WorkloadSubmitted, "moved", submitted("moved"))

	leases, ttl, err := bus.EnsureLeaseBucket(ctx, js, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader := bus.NewLeadership(leases, LeaseKey, "test", ttl)
	if ok, err := leader.Lead(ctx); !ok || err != nil {
		t.Fatalf("lead: %v %v", ok, err)
	}
	defer leader.Release()
	r, err := New(Config{Options: Options{Retention: time.Millisecond, HistoryRetention: time.Hour, Interval: time.Second,
		Snapshots: []string{"admission-0"}}, JS: js, Stream: stream, Store: st, Leader: leader,
		Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Expired != 1 || rep.Blocked != "no snapshot bucket" {
		t.Errorf("pass: %d expired (blocked: %q), want 1 (blocked: no snapshot bucket)", rep.Expired, rep.Blocked)
	}
	for name, want := range map[string]events.Type{"moved": events.WorkloadSubmitted, "done": events.WorkloadExpired} {
		m, err := stream.GetLastMsgForSubject(ctx, events.WorkloadSubject("team", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := events.Type(m.Header.Get(events.HeaderType)); got != want {
			t.Errorf("%s: last event %s, want %s", name, got, want)
		}
	}
}

// TestBatchedHistoryWaitsForTheLogToSettle: a deleted workload whose
// history has an event in a batch is purged only once the gate (here
// the deciders' snapshot) is BatchSettle past its end, by event time;
// before, the purge stops there. The purge floor is raised to the gate
// before anything is purged.
func TestBatchedHistoryWaitsForTheLogToSettle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(testenv.NATS(t).ClientURL(), "retention-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := bus.EnsureStream(ctx, js, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seq uint64
	publish := func(name string, typ events.Type, at time.Duration, batch *events.Batch, data any) {
		t.Helper()
		seq++
		ev := events.Event{ID: fmt.Sprintf("ev-%d", seq), Type: typ, Source: events.SourceIngest, Time: t0.Add(at),
			Subject: events.WorkloadSubject("team", name), Data: data, Batch: batch}
		if _, _, err := bus.Publish(ctx, js, ev, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(ctx, []store.Record{{Seq: seq, Event: ev}}); err != nil {
			t.Fatal(err)
		}
	}
	submitted := func(name string) any {
		wl, _ := json.Marshal(map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
			"metadata": map[string]any{"name": name, "namespace": "team"}, "spec": map[string]any{"queueName": "lq"}})
		return &events.WorkloadSubmittedData{WorkloadRef: events.WorkloadRef{Namespace: "team", Name: name}, Workload: wl, CreatedAt: t0}
	}
	batch := &events.Batch{ID: "b", Size: 2}
	publish("b0", events.WorkloadSubmitted, 0, batch, submitted("b0"))
	publish("b1", events.WorkloadSubmitted, 0, batch, submitted("b1"))
	publish("b1", events.WorkloadDeleted, time.Second, nil, &events.WorkloadRef{Namespace: "team", Name: "b1"})
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket})
	if err != nil {
		t.Fatal(err)
	}
	snapshotAt := func(name string, at time.Duration) {
		t.Helper()
		publish(name, events.WorkloadSubmitted, at, nil, submitted(name))
		meta := jetstream.ObjectMeta{Name: "admission-0", Metadata: map[string]string{SnapshotSeqKey: fmt.Sprint(seq)}}
		if _, err := obs.PutBytes(ctx, meta.Name, []byte("state")); err != nil {
			t.Fatal(err)
		}
		if err := obs.UpdateMeta(ctx, meta.Name, meta); err != nil {
			t.Fatal(err)
		}
	}
	leases, ttl, err := bus.EnsureLeaseBucket(ctx, js, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader := bus.NewLeadership(leases, LeaseKey, "test", ttl)
	if ok, err := leader.Lead(ctx); !ok || err != nil {
		t.Fatalf("lead: %v %v", ok, err)
	}
	defer leader.Release()
	r, err := New(Config{Options: Options{Retention: time.Millisecond, HistoryRetention: time.Hour, Interval: time.Second,
		Snapshots: []string{"admission-0"}}, JS: js, Stream: stream, Store: st, Leader: leader,
		Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.WorkloadSubject("team", "b1")))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[events.WorkloadSubject("team", "b1")]
	}
	// The gate one minute past b1's end: not settled.
	snapshotAt("m1", time.Minute)
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Purged != 0 || rep.Kept != 1 || count() != 2 {
		t.Errorf("gate 1m past the batched end: purged %d, kept %d, %d events left; want 0, 1, 2", rep.Purged, rep.Kept, count())
	}
	// Ten minutes past: settled.
	snapshotAt("m2", 10*time.Minute)
	if rep, err = r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if rep.Purged != 1 || rep.Kept != 0 || count() != 0 {
		t.Errorf("gate 10m past the batched end: purged %d, kept %d, %d events left; want 1, 0, 0", rep.Purged, rep.Kept, count())
	}
	if floor, err := bus.PurgeFloor(ctx, js); err != nil || floor != rep.Gate || rep.Gate != seq {
		t.Errorf("purge floor %d (%v), gate %d; want both %d", floor, err, rep.Gate, seq)
	}
}
