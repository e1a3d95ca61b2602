package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/retention"
)

// retentionConfig is one flavor and a ClusterQueue of 4 cpu, applied as
// two versions (3 cpu, then 4), so its subject holds a superseded one.
func retentionConfig(cpu string) []byte {
	return []byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "` + cpu + `"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
`)
}

func oneCPU(name string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"team"},
"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name))
}

// liveState replays JQ_EVENTS, as it is now, into a fresh engine, as a
// decider starting from scratch does, and renders what it holds: each
// workload's status and admission, and each ClusterQueue's usage.
func (s *system) liveState() (map[string]string, map[string]string) {
	s.t.Helper()
	eng := engine.New()
	// Read until nothing is pending: the last sequence itself may be
	// purged.
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		c, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			s.t.Fatal(err)
		}
		for {
			m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				s.t.Fatalf("read the log: %v", err)
			}
			meta, err := m.Metadata()
			if err != nil {
				s.t.Fatal(err)
			}
			ev, err := bus.Decode(m)
			if err == nil {
				err = replay.Apply(eng, ev)
			}
			if err != nil {
				s.t.Errorf("replaying the event at %d: %v", meta.Sequence.Stream, err)
			}
			if meta.NumPending == 0 {
				return
			}
		}
	})
	eng.RunToQuiescence(time.Now())
	wls := map[string]string{}
	for k, w := range eng.Workloads() {
		wls[k] = string(w.Status)
		if w.Admission != nil {
			wls[k] += fmt.Sprintf(" in %s %v", w.Admission.ClusterQueue, w.Admission.PodSets)
		}
	}
	usage := map[string]string{}
	for name, cq := range eng.Snapshot().ClusterQueues {
		usage[name] = fmt.Sprint(cq.Usage)
	}
	return wls, usage
}

// subjectCount is how many messages JQ_EVENTS holds on a subject.
func (s *system) subjectCount(subject string) uint64 {
	s.t.Helper()
	var n uint64
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		st, err := js.Stream(ctx, events.Stream)
		if err != nil {
			s.t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			s.t.Fatal(err)
		}
		n = info.State.Subjects[subject]
	})
	return n
}

// lastType is the type of the last event on a workload's subject.
func (s *system) lastType(name string) events.Type {
	s.t.Helper()
	var typ events.Type
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		st, err := js.Stream(ctx, events.Stream)
		if err != nil {
			s.t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, events.WorkloadSubject("team", name))
		if err != nil {
			s.t.Fatal(err)
		}
		typ = events.Type(m.Header.Get(events.HeaderType))
	})
	return typ
}

// putSnapshots stands in for the deciders' snapshot writer: an object per
// decider in JQ_SNAPSHOTS, reflecting sequence seq.
func (s *system) putSnapshots(names []string, seq uint64) {
	s.t.Helper()
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: retention.SnapshotBucket})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, n := range names {
			meta := jetstream.ObjectMeta{Name: n, Metadata: map[string]string{retention.SnapshotSeqKey: strconv.FormatUint(seq, 10)}}
			if _, err := obs.Put(ctx, meta, bytes.NewReader([]byte("state"))); err != nil {
				s.t.Fatal(err)
			}
		}
	})
}

// TestRetentionKeepsLiveState runs retention at its most aggressive (a
// finished workload expires, and an ended history goes, a millisecond
// after it may) through submit, admit, finish and delete, and checks
// that it expires exactly the finished workloads, purges nothing while
// the deciders' snapshots are missing, then purges exactly the ended
// histories (one of a batch too) and every superseded configuration
// version; that a decider replaying the purged log from
// scratch holds exactly the live state the whole log gave; that the
// restarted deciders go on deciding on it (the full queue admits nothing
// more); and that PostgreSQL still answers for the expired workloads.
func TestRetentionKeepsLiveState(t *testing.T) {
	snapshots := []string{"admission-0", "podsready-0"}
	s := startOpts(t, false, &retention.Options{Retention: time.Millisecond, HistoryRetention: time.Hour,
		Interval: 50 * time.Millisecond, Snapshots: snapshots, BatchSettle: time.Millisecond})
	yaml := func(b []byte) []byte { return b }
	for _, cpu := range []string{"3", "4"} {
		req, _ := http.NewRequest("POST", s.base+"/v1/apply", bytes.NewReader(yaml(retentionConfig(cpu))))
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("apply: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	for i := range 8 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU(fmt.Sprintf("w%d", i)))
	}
	// Two submitted as one batch: once b1 is deleted and purged, the log
	// holds a batch that never completes.
	s.must(http.StatusAccepted, "POST", "/v1/workloads", list(oneCPU("b0"), oneCPU("b1")))
	s.sync()
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w0/finish", nil)
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w1/finish", nil)
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/w7", nil)
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/b1", nil)
	s.waitFor("w0 and w1 expired", func() bool {
		return s.lastType("w0") == events.WorkloadExpired && s.lastType("w1") == events.WorkloadExpired
	})
	s.sync()
	// A pass that sees w2's finish projected (and expires it) runs after
	// the expiries of w0 and w1 were projected: its purge found no
	// snapshot bucket and purged nothing.
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w2/finish", nil)
	s.waitFor("w2 expired", func() bool { return s.lastType("w2") == events.WorkloadExpired })
	s.sync()
	for _, name := range []string{"w0", "w1", "w2", "w7"} {
		if n := s.subjectCount(events.WorkloadSubject("team", name)); n == 0 {
			t.Errorf("%s: its history was purged without the deciders' snapshots", name)
		}
	}
	if n := s.subjectCount(events.ConfigSubject("ClusterQueue", "", "cq")); n != 2 {
		t.Errorf("ClusterQueue cq: %d versions in the log before the snapshots exist, want 2", n)
	}
	wantLive := map[string]string{}
	for _, n := range []string{"w3", "w4", "w5", "w6"} {
		wantLive["team/"+n] = "admitted"
	}
	wantLive["team/b0"] = "pending"
	before, usageBefore := s.liveState()
	got := map[string]string{}
	for k, v := range before {
		got[k], _, _ = cut(v, " ")
	}
	if d := cmp.Diff(wantLive, got); d != "" {
		t.Fatalf("live workloads from the whole log (-want +got):\n%s", d)
	}

	s.putSnapshots(snapshots, s.streamState().LastSeq)
	s.waitFor("ended histories purged", func() bool {
		for _, n := range []string{"w0", "w1", "w2", "w7", "b1"} {
			if s.subjectCount(events.WorkloadSubject("team", n)) != 0 {
				return false
			}
		}
		return s.subjectCount(events.ConfigSubject("ClusterQueue", "", "cq")) == 1
	})
	for _, n := range []string{"w3", "w4", "w5", "w6", "b0"} {
		if c := s.subjectCount(events.WorkloadSubject("team", n)); c == 0 {
			t.Errorf("%s: a live workload's history was purged", n)
		}
	}
	after, usageAfter := s.liveState()
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("live workloads replayed from the purged log differ from the whole log's (-whole +purged):\n%s", d)
	}
	if d := cmp.Diff(usageBefore, usageAfter); d != "" {
		t.Errorf("ClusterQueue usage replayed from the purged log differs (-whole +purged):\n%s", d)
	}

	// The deciders restart from scratch on the purged log and go on: the
	// queue is full, so a new workload waits; when a place frees, b0 (the
	// older) takes it: admission released b0's batch, whose other member
	// the log lost, instead of waiting for it.
	s.stopAdmission()
	s.stopPodsReady()
	s.startAdmission("b")
	s.startPodsReady("b")
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("probe"))
	s.sync()
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w3/finish", nil)
	s.sync()
	status := map[string]string{}
	for _, v := range s.workloads() {
		status[v.Name] = v.Status
	}
	want := map[string]string{"w0": "finished", "w1": "finished", "w2": "finished", "w3": "finished", "w4": "admitted",
		"w5": "admitted", "w6": "admitted", "b0": "admitted", "probe": "pending"}
	if d := cmp.Diff(want, status); d != "" {
		t.Errorf("workloads after the restart (-want +got):\n%s", d)
	}
	// The projection keeps an expired workload's history; its name is free.
	var w0 struct {
		Status string `json:"status"`
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	s.call("GET", "/v1/workloads/team/w0", nil, &w0)
	var types []string
	for _, e := range w0.Events {
		types = append(types, e.Type)
	}
	if w0.Status != "finished" || !slices.Contains(types, string(events.WorkloadExpired)) {
		t.Errorf("w0 in PostgreSQL: status %q, events %v; want finished, with its expiry", w0.Status, types)
	}
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("w0"))
}

func cut(s, sep string) (string, string, bool) {
	i := bytes.Index([]byte(s), []byte(sep))
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// TestHistoryRetentionKeepsLiveState runs the projection's retention at
// the shortest --history-retention the code accepts (1ns: every row and
// event is older than the cut at every pass) beside the log's at 1 ms,
// and checks that PostgreSQL drops exactly the ended workloads (deleted,
// expired) while every live one, pending or admitted, a name submitted
// again after its deletion or its expiry included, reads back through
// the HTTP API exactly as before, row and whole history, after passes
// that pruned; and that the services go on deciding on them.
func TestHistoryRetentionKeepsLiveState(t *testing.T) {
	snapshots := []string{"admission-0", "podsready-0"}
	s := startOpts(t, false, &retention.Options{Retention: time.Millisecond, HistoryRetention: time.Nanosecond,
		Interval: 50 * time.Millisecond, Snapshots: snapshots, BatchSettle: time.Millisecond})
	req, _ := http.NewRequest("POST", s.base+"/v1/apply", bytes.NewReader(retentionConfig("4")))
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %v %v", resp, err)
	}
	resp.Body.Close()
	for i := range 8 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU(fmt.Sprintf("w%d", i)))
	}
	s.sync()
	// w7 waits; deleted and submitted again, it waits behind w4..w6.
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/w7", nil)
	s.sync()
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("w7"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w0/finish", nil)
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w1/finish", nil)
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/w2", nil)
	s.waitFor("w0 and w1 expired", func() bool {
		return s.lastType("w0") == events.WorkloadExpired && s.lastType("w1") == events.WorkloadExpired
	})
	// w1's name is free: a new, live workload under it, whose row holds
	// the expired one's history too until it ends.
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("w1"))
	// The last to end: once its history is pruned, a pass has dealt with
	// every end before it (w1's expiry included).
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("last"))
	s.sync()
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/last", nil)
	s.sync()

	status := func() map[string]string {
		m := map[string]string{}
		for _, v := range s.workloads() {
			m[v.Name] = v.Status
		}
		return m
	}
	// read is a workload as GET /v1/workloads/{ns}/{name} answers.
	read := func(name string) (int, json.RawMessage) {
		var body json.RawMessage
		code := s.call("GET", "/v1/workloads/team/"+name, nil, &body)
		return code, body
	}
	live := []string{"w1", "w3", "w4", "w5", "w6", "w7"}
	want := map[string]string{"w0": "finished", "w1": "pending", "w3": "admitted", "w4": "admitted", "w5": "admitted",
		"w6": "admitted", "w7": "pending"}
	if d := cmp.Diff(want, status()); d != "" {
		t.Fatalf("workloads before the snapshots exist (-want +got):\n%s", d)
	}
	before := map[string]json.RawMessage{}
	for _, n := range live {
		code, body := read(n)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", n, code)
		}
		before[n] = body
	}
	db, err := pgx.Connect(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	eventsOf := func(names ...string) int {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM workload_events WHERE namespace = 'team' AND name = ANY($1)`,
			names).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Let the purge, and with it PostgreSQL's pruning, through. Rows and
	// ended histories go in one transaction with any live row or history
	// a wrong prune would take: once w0's row and last's history are
	// gone, a pass has pruned up to every end so far.
	s.putSnapshots(snapshots, s.streamState().LastSeq)
	s.waitFor("w0's row and the ended histories pruned", func() bool {
		code, _ := read("w0")
		return code == http.StatusNotFound && eventsOf("w0", "w2", "last") == 0
	})
	delete(want, "w0")
	if d := cmp.Diff(want, status()); d != "" {
		t.Errorf("workloads after pruning (-want +got):\n%s", d)
	}
	for _, n := range live {
		code, body := read(n)
		if code != http.StatusOK {
			t.Errorf("GET %s after pruning: %d", n, code)
			continue
		}
		if d := cmp.Diff(before[n], body, transformJSON); d != "" {
			t.Errorf("%s after pruning (-before +after):\n%s", n, d)
		}
	}

	// The deciders go on: w3 finishes, w7 takes its place; w3 expires and
	// its row goes in a later pass, the others stay as they were.
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w3/finish", nil)
	s.waitFor("w3 expired", func() bool { return s.lastType("w3") == events.WorkloadExpired })
	s.sync()
	s.putSnapshots(snapshots, s.streamState().LastSeq)
	s.waitFor("w3 pruned", func() bool {
		code, _ := read("w3")
		return code == http.StatusNotFound && eventsOf("w3") == 0
	})
	want = map[string]string{"w1": "pending", "w4": "admitted", "w5": "admitted", "w6": "admitted", "w7": "admitted"}
	if d := cmp.Diff(want, status()); d != "" {
		t.Errorf("workloads after w3's end (-want +got):\n%s", d)
	}
	for _, n := range []string{"w1", "w4", "w5", "w6"} {
		if _, body := read(n); !cmp.Equal(before[n], body, transformJSON) {
			t.Errorf("%s changed after a second prune:\n%s\nwas\n%s", n, body, before[n])
		}
	}
	// w7's history is what it was (its deleted incarnation's included),
	// then its admission.
	type history struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	types := func(b json.RawMessage) []string {
		var h history
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range h.Events {
			out = append(out, e.Type)
		}
		return out
	}
	_, body := read("w7")
	was, is := types(before["w7"]), types(body)
	if !slices.Contains(was, string(events.WorkloadDeleted)) || len(is) <= len(was) || !slices.Equal(is[:len(was)], was) ||
		!slices.Contains(is[len(was):], string(events.QuotaReserved)) {
		t.Errorf("w7's history after pruning: %v; want %v (with its deletion), then its admission", is, was)
	}
}

// transformJSON compares JSON documents by value.
var transformJSON = cmp.Transformer("json", func(b json.RawMessage) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	return v
})
