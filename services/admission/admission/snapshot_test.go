package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// startSnap runs an instance with a snapshot policy; rt is set to its
// runtime once it runs, for its metrics.
func (h *harness) startSnap(instance string, policy snapshot.Policy, rt *atomic.Pointer[service.Runtime]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "admission", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, r *service.Runtime) error {
				if rt != nil {
					rt.Store(r)
				}
				return Run(ctx, r, Config{Member: bus.Member{NATSURL: h.url, Shard: "admission-0", Instance: instance, LeaseTTL: time.Second},
					Snapshot: policy})
			})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("%s: %v", instance, err)
		}
	}
}

// lastSeq is the stream's last sequence.
func (h *harness) lastSeq() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), events.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.LastSeq
}

// snapshotSeq is Jq-Seq of admission-0's snapshot, 0 without one.
func (h *harness) snapshotSeq() uint64 {
	obs, err := h.js.ObjectStore(context.Background(), snapshot.Bucket)
	if err != nil {
		return 0
	}
	info, err := obs.GetInfo(context.Background(), "admission-0")
	if err != nil {
		return 0
	}
	seq, _ := strconv.ParseUint(info.Metadata["Jq-Seq"], 10, 64)
	return seq
}

// decisionsAfter renders admission's events after seq: id, type, subject
// and payload (not the time, which is the deciding instance's clock).
func (h *harness) decisionsAfter(seq uint64) []string {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), events.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for n := seq + 1; n <= h.lastSeq(); n++ {
		m, err := s.GetMsg(context.Background(), n)
		if err != nil {
			h.t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			h.t.Fatal(err)
		}
		if ev.Source != source {
			continue
		}
		data, _ := json.Marshal(ev.Data)
		out = append(out, fmt.Sprintf("%s %s %s %s", ev.ID, ev.Type, m.Subject, data))
	}
	return out
}

func (h *harness) finish(name string) {
	h.publish(events.WorkloadFinished, events.WorkloadSubject("ns", name), &events.WorkloadFinishedData{
		WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: name}, Succeeded: true})
}

// quotaReserved counts QuotaReserved among rendered decisions.
func quotaReserved(ds []string) int {
	n := 0
	for _, d := range ds {
		var id, typ string
		fmt.Sscan(d, &id, &typ)
		if typ == string(events.QuotaReserved) {
			n++
		}
	}
	return n
}

// TestRestartFromSnapshotDecidesAsFullReplay: the same log in two
// JetStreams; admission runs over both, stops, the same tail is appended
// to both, and admission starts again: on one from a snapshot taken when
// it caught up, on the other with a full replay. Both publish exactly the
// same decisions.
func TestRestartFromSnapshotDecidesAsFullReplay(t *testing.T) {
	withSnap, without := newHarness(t), newHarness(t)
	head := func(h *harness) {
		h.world(4)
		for i := range 6 {
			h.submit(fmt.Sprint("w", i), 1)
		}
	}
	tail := func(h *harness) {
		h.finish("w2")
		h.finish("w3")
		for i := 6; i < 9; i++ {
			h.submit(fmt.Sprint("w", i), 1)
		}
	}
	// A snapshot is due once 9 events are read: when the instance has
	// caught up with the head (all published before it starts), before it
	// decides; its 6 decisions do not make another due.
	every := snapshot.Policy{Events: 9}
	for _, h := range []*harness{withSnap, without} {
		head(h)
		policy := snapshot.Policy{}
		if h == withSnap {
			policy = every
		}
		stop := h.startSnap("first", policy, nil)
		h.waitAdmitted(4)
		// Settled: the pending two have their Inadmissible too.
		testenv.Eventually(t, "first decisions", 10*time.Second, func() error {
			if n := len(h.decisionsAfter(0)); n != 6 {
				return fmt.Errorf("%d decisions, want 6", n)
			}
			return nil
		})
		stop()
	}
	if got := withSnap.snapshotSeq(); got != 9 {
		// 3 configuration objects and 6 submissions, before any decision.
		t.Fatalf("snapshot at %d, want 9", got)
	}
	if got := without.snapshotSeq(); got != 0 {
		t.Fatalf("a snapshot at %d where none was to be written", got)
	}
	if a, b := withSnap.decisionsAfter(0), without.decisionsAfter(0); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("the two logs differ before the restart:\n%v\n%v", a, b)
	}
	tail(withSnap)
	tail(without)
	end := withSnap.lastSeq()
	var rt atomic.Pointer[service.Runtime]
	var got [2][]string
	for i, h := range []*harness{withSnap, without} {
		stop := h.startSnap("second", snapshot.Policy{}, &rt)
		// w4 and w5 take the quota w2 and w3 freed; w6…w8 wait.
		testenv.Eventually(t, "decisions after the restart", 10*time.Second, func() error {
			if n := len(h.decisionsAfter(end)); n != 5 {
				return fmt.Errorf("%d decisions, want 5", n)
			}
			return nil
		})
		if h == withSnap {
			m := metricVec(t, rt.Load(), "jetqueue_snapshot_restores_total", "")
			if m != 1 {
				t.Fatalf("restores = %v, want 1: the restart did not use the snapshot", m)
			}
		}
		stop()
		got[i] = h.decisionsAfter(end)
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Fatalf("after the restart, from a snapshot:\n%v\nfrom the whole log:\n%v", got[0], got[1])
	}
	if n := quotaReserved(got[0]); n != 2 {
		t.Fatalf("%d admissions after the restart, want 2: %v", n, got[0])
	}
}

// TestLeaderSnapshotsByCompaction: once it has decided, the leader's
// snapshot is a fold of the log (compaction), written in the background;
// it reflects the leader's own published decisions, and an instance
// restored from it admits nothing twice.
func TestLeaderSnapshotsByCompaction(t *testing.T) {
	h := newHarness(t)
	h.world(10)
	var leader atomic.Pointer[service.Runtime]
	stop := h.startSnap("a", snapshot.Policy{Events: 1}, &leader)
	for i := range 5 {
		h.submit(fmt.Sprint("w", i), 1)
	}
	h.waitAdmitted(5)
	testenv.Eventually(t, "a snapshot past the decisions", 10*time.Second, func() error {
		if seq, last := h.snapshotSeq(), h.lastSeq(); seq != last {
			return fmt.Errorf("snapshot at %d, stream at %d", seq, last)
		}
		return nil
	})
	// It compacted, paced: it rested between pieces of the work.
	if m := metricVec(t, leader.Load(), "jetqueue_snapshot_compaction_rest_seconds_total", ""); m <= 0 {
		t.Fatalf("compactions rested %vs, want more than 0", m)
	}
	stop()
	// The snapshot is exactly the fold of the log up to its sequence.
	store, err := snapshot.Open(context.Background(), h.js, snapshot.Options{Name: "admission-0", Version: snapshotVersion})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := store.Load(context.Background())
	if err != nil || sn == nil {
		t.Fatalf("load: %v", err)
	}
	if want := h.fold(sn.Seq); string(sn.Payload) != string(want) {
		t.Fatalf("the snapshot at %d is not the fold of the log:\n%s\nwant\n%s", sn.Seq, sn.Payload, want)
	}
	var rt atomic.Pointer[service.Runtime]
	stop = h.startSnap("b", snapshot.Policy{}, &rt)
	defer stop()
	// 5 of the 10 cpus are taken: of 6 late workloads, 5 fit.
	for i := range 6 {
		h.submit(fmt.Sprint("late", i), 1)
	}
	h.waitAdmitted(10)
	testenv.Eventually(t, "the last one's reason", 10*time.Second, func() error {
		if n := len(h.decisionsAfter(0)); n != 11 {
			return fmt.Errorf("%d decisions, want 11", n)
		}
		return nil
	})
	got := h.admissions()
	total := 0
	for name, n := range got {
		total += n
		if n != 1 {
			t.Errorf("%s admitted %d times", name, n)
		}
	}
	if total != 10 {
		t.Errorf("%d admissions, want 10 (the quota): %v", total, got)
	}
	if m := metricVec(t, rt.Load(), "jetqueue_snapshot_restores_total", ""); m != 1 {
		t.Fatalf("restores = %v, want 1", m)
	}
}

// TestUnusableSnapshotIsAFullReplay: a snapshot claiming more events than
// the stream holds (the stream was recreated, or the bucket belongs
// elsewhere), one of another encoding version, and one whose content does
// not decode are not used: the instance counts the fallback under its
// reason, replays the whole log and decides from it (the world exists
// only in the log).
func TestUnusableSnapshotIsAFullReplay(t *testing.T) {
	empty := func(t *testing.T) []byte {
		// An empty state: restored, it would forget the world.
		s := &Service{m: metrics.NewAdmission(nil)}
		s.reset()
		payload, err := s.encodeState(nil)
		if err != nil {
			t.Fatal(err)
		}
		return payload
	}
	for _, tc := range []struct {
		reason  string
		version int
		seq     uint64
		payload func(*testing.T) []byte
	}{
		{snapshot.ReasonAhead, snapshotVersion, 1000, empty},
		{snapshot.ReasonVersion, snapshotVersion + 1, 3, empty},
		{snapshot.ReasonDecode, snapshotVersion, 3, func(*testing.T) []byte { return []byte("{}\n{\"workloads\":[{}]}") }},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			h := newHarness(t)
			h.world(10)
			store, err := snapshot.Open(context.Background(), h.js, snapshot.Options{Name: "admission-0", Version: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Save(context.Background(), tc.seq, tc.payload(t)); err != nil {
				t.Fatal(err)
			}
			var rt atomic.Pointer[service.Runtime]
			stop := h.startSnap("a", snapshot.Policy{}, &rt)
			defer stop()
			h.submit("w", 1)
			if got := h.waitAdmitted(1); got["w"] != 1 {
				t.Fatalf("admissions %v", got)
			}
			if fb := metricVec(t, rt.Load(), "jetqueue_snapshot_fallbacks_total", tc.reason); fb != 1 {
				t.Fatalf("fallbacks{reason=%s} = %v, want 1", tc.reason, fb)
			}
			if n := metricVec(t, rt.Load(), "jetqueue_snapshot_restores_total", ""); n != 0 {
				t.Fatalf("restores = %v, want 0", n)
			}
		})
	}
}

// metricVec reads a counter of the instance's registry: the series whose
// reason label is reason ("" for a counter without one).
func metricVec(t *testing.T, rt *service.Runtime, name, reason string) float64 {
	t.Helper()
	if rt == nil {
		t.Fatal("the instance never ran")
	}
	fams, err := rt.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			r := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					r = l.GetValue()
				}
			}
			if r == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// fold reads the log up to seq into a fresh state, as a standby does, and
// encodes it.
func (h *harness) fold(seq uint64) []byte {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &Service{cfg: Config{Wall: time.Now}, log: zap.NewNop(), rt: &service.Runtime{Log: zap.NewNop()}, js: h.js, batch: 512,
		m: metrics.NewAdmission(nil)}
	s.reset()
	cons, err := h.js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		h.t.Fatal(err)
	}
	for s.last < seq {
		if _, err := s.consume(ctx, cons); err != nil {
			h.t.Fatal(err)
		}
	}
	if s.last != seq {
		h.t.Fatalf("folded to %d, want %d", s.last, seq)
	}
	payload, err := s.encodeState(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return payload
}

// TestRestoredCountersGoOn: Kueue's counters go on exactly after a
// restore: the eviction of a workload admitted before the snapshot is
// counted under its ClusterQueue, as after a full replay.
func TestRestoredCountersGoOn(t *testing.T) {
	h := newHarness(t)
	h.world(10)
	stop := h.startSnap("a", snapshot.Policy{Events: 1}, nil)
	h.submit("w0", 1)
	h.waitAdmitted(1)
	testenv.Eventually(t, "a snapshot past the admission", 10*time.Second, func() error {
		if seq, last := h.snapshotSeq(), h.lastSeq(); seq != last {
			return fmt.Errorf("snapshot at %d, stream at %d", seq, last)
		}
		return nil
	})
	stop()
	h.publish(events.Evicted, events.WorkloadSubject("ns", "w0"), &events.EvictedData{
		WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: "w0"}, Reason: "Preempted"})
	var rt atomic.Pointer[service.Runtime]
	stop = h.startSnap("b", snapshot.Policy{}, &rt)
	defer stop()
	// Evicted, w0 is admitted again.
	if got := h.waitAdmitted(2); got["w0"] != 2 {
		t.Fatalf("admissions %v", got)
	}
	if n := metricVec(t, rt.Load(), "jetqueue_snapshot_restores_total", ""); n != 1 {
		t.Fatalf("restores = %v, want 1", n)
	}
	testenv.Eventually(t, "the eviction counted", 5*time.Second, func() error {
		if n := metricVec(t, rt.Load(), "kueue_evicted_workloads_total", "Preempted"); n != 1 {
			return fmt.Errorf("kueue_evicted_workloads_total{reason=Preempted} = %v, want 1", n)
		}
		return nil
	})
}
