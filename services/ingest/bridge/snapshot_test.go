package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// startSnap runs a bridge with a snapshot policy and metrics until stop.
func (e *env) startSnap(policy snapshot.Policy, m *snapshot.Metrics) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	synced := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Kube: e.kube, API: e.api, JS: e.js, SubmissionID: submissionID, Synced: func() { close(synced) },
			Snapshot: policy, SnapshotMetrics: m})
	}()
	select {
	case <-synced:
	case err := <-done:
		e.t.Fatalf("bridge stopped before reconciling: %v", err)
	case <-time.After(10 * time.Second):
		e.t.Fatal("bridge did not sync")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("bridge: %v", err)
		}
	}
}

func (e *env) lastSeq() uint64 {
	s, err := e.js.Stream(e.ctx, events.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.LastSeq
}

// fold reads the log up to seq into a fresh state and encodes it.
func (e *env) fold(seq uint64) []byte {
	s, err := e.js.Stream(e.ctx, events.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	st := newState()
	for n := uint64(1); n <= seq; n++ {
		m, err := s.GetMsg(e.ctx, n)
		if err != nil {
			e.t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			e.t.Fatal(err)
		}
		_, _ = st.apply(n, ev)
	}
	out, err := st.encode()
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestRestartFromSnapshot: a bridge that snapshots its fold of the log
// writes exactly the fold; a new term restores it, reads only the events
// after it, and acts on them (an eviction stops the running Job).
func TestRestartFromSnapshot(t *testing.T) {
	e := newEnv(t)
	e.flavor("spot", spotFlavor)
	const ns, name = "team-a", "train"
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := e.startSnap(snapshot.Policy{Events: 1}, nil)
	eventually(t, "new Job submitted", e.callsAre("submit", "submit team-a/train"))
	e.admit(ns, name, "spot", 2)
	eventually(t, "admitted Job started", e.jobIs(ns, name, running))
	store, err := snapshot.Open(e.ctx, e.js, snapshot.Options{Name: SnapshotName, Version: snapshotVersion})
	if err != nil {
		t.Fatal(err)
	}
	var sn *snapshot.Snapshot
	eventually(t, "a snapshot of the whole log", func() error {
		sn, err = store.Load(e.ctx)
		if err != nil || sn == nil || sn.Seq != e.lastSeq() {
			return fmt.Errorf("snapshot %v, %v; stream at %d", sn != nil, err, e.lastSeq())
		}
		return nil
	})
	stop()
	// flavor, submission, admission.
	if sn.Seq != 3 {
		t.Fatalf("snapshot at %d, want 3", sn.Seq)
	}
	if want := e.fold(sn.Seq); string(sn.Payload) != string(want) {
		t.Fatalf("the snapshot is not the fold of the log:\n%s\nwant\n%s", sn.Payload, want)
	}
	back, err := decodeState(sn)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.encode(); string(again) != string(sn.Payload) {
		t.Fatalf("decoded and encoded again:\n%s\nwant\n%s", again, sn.Payload)
	}
	e.evict(ns, name, "Preempted")
	m := snapshot.NewMetrics(prometheus.NewRegistry(), "kube-bridge")
	stop = e.startSnap(snapshot.Policy{}, m)
	defer stop()
	eventually(t, "evicted Job stopped after the restart", e.jobIs(ns, name, stopped))
	if n := testutil.ToFloat64(m.Restores); n != 1 {
		t.Fatalf("restores = %v, want 1", n)
	}
	if err := e.callsAre("submit", "submit team-a/train")(); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}
