package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/sim"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	url string
	js  jetstream.JetStream
	n   int
}

func newHarness(t *testing.T) *harness {
	srv := testenv.NATS(t)
	nc, err := bus.Connect(srv.ClientURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if _, err := bus.EnsureStream(context.Background(), js, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, url: srv.ClientURL(), js: js}
}

// start runs one admission instance until the returned stop is called.
func (h *harness) start(instance string) (stop func()) { return h.startWith(instance, nil) }

// startWith runs an instance whose batch wall clock is wall (nil: time.Now).
func (h *harness) startWith(instance string, wall func() time.Time) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "admission", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: h.url, Shard: "admission-0", Instance: instance, LeaseTTL: time.Second}, Wall: wall})
			})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("%s: %v", instance, err)
		}
	}
}

func (h *harness) publish(typ events.Type, subject string, data any) {
	h.t.Helper()
	h.n++
	ev := events.Event{ID: fmt.Sprint("in-", h.n), Type: typ, Source: "test", Time: t0, Subject: subject, Data: data}.FromOwner()
	if _, _, err := bus.Publish(context.Background(), h.js, ev, nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) config(kind, ns, name, object string) {
	h.publish(events.ConfigApplied, events.ConfigSubject(kind, ns, name), &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: kind, Namespace: ns, Name: name}, Object: json.RawMessage(object)})
}

func (h *harness) submit(name string, cpu int) {
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
		"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, name, cpu)
	h.publish(events.WorkloadSubmitted, events.WorkloadSubject("ns", name), &events.WorkloadSubmittedData{
		WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: name}, Workload: json.RawMessage(wl), CreatedAt: t0.Add(time.Duration(h.n) * time.Millisecond)})
}

func (h *harness) world(cpu int) {
	h.config("ResourceFlavor", "", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	h.config("ClusterQueue", "", "cq", fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},
		"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"%d"}]}]}]}}`, cpu))
	h.config("LocalQueue", "ns", "lq", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)
}

// decisions reads the whole stream and counts QuotaReserved per workload.
func (h *harness) admissions() map[string]int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, events.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	out := map[string]int{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			h.t.Fatal(err)
		}
		if d, ok := ev.Data.(*events.QuotaReservedData); ok {
			out[d.Name]++
		}
	}
	return out
}

func (h *harness) waitAdmitted(want int) map[string]int {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := h.admissions()
		total := 0
		for _, n := range got {
			total += n
		}
		if total >= want {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("admitted %v, want %d admissions", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAdmitsWhatFits(t *testing.T) {
	h := newHarness(t)
	stop := h.start("a")
	defer stop()
	h.world(4)
	h.submit("w1", 2)
	h.submit("w2", 2)
	h.submit("w3", 2)
	got := h.waitAdmitted(2)
	if got["w1"] != 1 || got["w2"] != 1 || got["w3"] != 0 {
		t.Errorf("admissions %v, want w1 and w2 once each", got)
	}
}

// TestRestartNeverDecidesTwice: a new instance replays the log, including
// the old instance's decisions, and only decides what is new.
func TestRestartNeverDecidesTwice(t *testing.T) {
	h := newHarness(t)
	stop := h.start("first")
	h.world(10)
	for i := range 5 {
		h.submit(fmt.Sprint("w", i), 1)
	}
	h.waitAdmitted(5)
	stop()
	stop2 := h.start("second")
	defer stop2()
	h.submit("late", 1)
	got := h.waitAdmitted(6)
	for name, n := range got {
		if n != 1 {
			t.Errorf("%s admitted %d times", name, n)
		}
	}
	if got["late"] != 1 {
		t.Errorf("late not admitted after the restart: %v", got)
	}
}

// TestStandbyTakesOver: two instances follow the log; only the leader
// decides; when it dies without releasing, the standby leads within the
// lease TTL and nothing is decided twice.
func TestStandbyTakesOver(t *testing.T) {
	h := newHarness(t)
	h.world(10)
	child := h.startProcess("a")
	h.submit("w0", 1)
	h.waitAdmitted(1)
	if got := h.leaseHolder(); got != "a" {
		t.Fatalf("lease held by %q, want the first instance a", got)
	}
	stopB := h.start("b")
	defer stopB()
	// SIGKILL: the leader neither releases its lease nor drains.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if got := h.leaseHolder(); got != "a" {
		t.Fatalf("right after the kill the lease is held by %q; a killed leader cannot have released it", got)
	}
	h.submit("w1", 1)
	got := h.waitAdmitted(2)
	if got["w0"] != 1 || got["w1"] != 1 {
		t.Errorf("admissions %v, want w0 and w1 once each", got)
	}
	if holder := h.leaseHolder(); holder != "b" {
		t.Errorf("after the takeover the lease is held by %q, want b", holder)
	}
	// Nothing decided twice once the dust settles: b does not admit w0
	// again on taking over.
	h.submit("w2", 1)
	got = h.waitAdmitted(3)
	if len(got) != 3 || got["w0"] != 1 || got["w1"] != 1 || got["w2"] != 1 {
		t.Errorf("admissions %v, want w0, w1 and w2 once each", got)
	}
}

// childNATS names the environment variable that makes the test binary run
// one admission instance instead of the tests (see TestMain), so that a
// test can kill an instance for real.
const childNATS, childInstance = "JQ_TEST_ADMISSION_NATS", "JQ_TEST_ADMISSION_INSTANCE"

func TestMain(m *testing.M) {
	if url := os.Getenv(childNATS); url != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err := service.RunContext(ctx, "admission", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: url, Shard: "admission-0", Instance: os.Getenv(childInstance), LeaseTTL: time.Second}})
			})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startProcess runs one admission instance in a child process, killed at
// the end of the test if still running.
func (h *harness) startProcess(instance string) *exec.Cmd {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childNATS+"="+h.url, childInstance+"="+instance)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// leaseHolder reads who holds the admission shard's lease ("" if nobody).
func (h *harness) leaseHolder() string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.js.KeyValue(ctx, bus.LeaseBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(ctx, "admission-0")
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return string(e.Value())
}

// events reads the whole stream, to its last sequence, in order.
func (h *harness) events() []events.Event {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, events.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []events.Event
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			h.t.Fatalf("seq %d: %v", seq, err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			h.t.Fatalf("seq %d: %v", seq, err)
		}
		out = append(out, ev)
	}
	return out
}

// ofType returns the events of one type, waiting until there are want.
func (h *harness) ofType(typ events.Type, want int) []events.Event {
	h.t.Helper()
	var got []events.Event
	testenv.Eventually(h.t, fmt.Sprintf("%d %s", want, typ), 15*time.Second, func() error {
		got = got[:0]
		for _, ev := range h.events() {
			if ev.Type == typ {
				got = append(got, ev)
			}
		}
		if len(got) < want {
			return fmt.Errorf("%d so far", len(got))
		}
		return nil
	})
	return got
}

func (h *harness) preemptingWorld() {
	h.config("ResourceFlavor", "", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	h.config("ClusterQueue", "", "cq", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},
		"spec":{"namespaceSelector":{},"preemption":{"withinClusterQueue":"LowerPriority"},
		"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"2"}]}]}]}}`)
	h.config("LocalQueue", "ns", "lq", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)
}

func (h *harness) submitBatch(batch *events.Batch, name string, priority int) {
	h.t.Helper()
	h.n++
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
		"spec":{"queueName":"lq","priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, priority)
	ev := events.Event{ID: fmt.Sprint("in-", h.n), Type: events.WorkloadSubmitted, Source: "test", Time: t0,
		Subject: events.WorkloadSubject("ns", name), Batch: batch, Data: &events.WorkloadSubmittedData{
			WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: name}, Workload: json.RawMessage(wl),
			CreatedAt: t0.Add(time.Duration(h.n) * time.Millisecond)}}
	if _, _, err := bus.Publish(context.Background(), h.js, ev, nil); err != nil {
		h.t.Fatal(err)
	}
}

// TestHeldPreemptionWhoseVictimFinishedDoesNotStall: one run decides two
// preemptions; the second is held while the first's eviction comes in,
// and meanwhile its victim finishes. The preemptor would never evict a
// finished victim, so a request naming it would be waited for forever;
// admission must drop it and admit the second preemptor on the freed
// quota. (Issue: admission stopped for good once a preemption raced a
// finish.)
func TestHeldPreemptionWhoseVictimFinishedDoesNotStall(t *testing.T) {
	h := newHarness(t)
	stop := h.start("a")
	defer stop()
	h.preemptingWorld()
	h.submitBatch(nil, "low-a", 0)
	h.submitBatch(nil, "low-b", 0)
	h.waitAdmitted(2)
	batch := &events.Batch{ID: "highs", Size: 2}
	h.submitBatch(batch, "high-a", 10)
	h.submitBatch(batch, "high-b", 10)

	req := h.ofType(events.PreemptionRequested, 1)[0]
	d := req.Data.(*events.PreemptionRequestedData)
	if len(d.Victims) != 1 {
		t.Fatalf("first request's victims %+v, want one", d.Victims)
	}
	other := "low-a"
	if d.Victims[0].Name == "low-a" {
		other = "low-b"
	}
	// The other low finishes before the first eviction is in: the held
	// second request chose it as its victim.
	h.publish(events.WorkloadFinished, events.WorkloadSubject("ns", other),
		&events.WorkloadFinishedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: other}, Succeeded: true})
	for _, ev := range replay.Evictions(req, d) {
		if _, _, err := bus.Publish(context.Background(), h.js, ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := h.waitAdmitted(4)
	for _, name := range []string{"low-a", "low-b", "high-a", "high-b"} {
		if got[name] != 1 {
			t.Errorf("%s admitted %d times, want once (all: %v)", name, got[name], got)
		}
	}
	if n := len(h.ofType(events.PreemptionRequested, 1)); n != 1 {
		t.Errorf("%d preemption requests, want 1: the second one's only victim had finished", n)
	}
}

// TestBatchDelaysOnlyItsMembers: a batch that never completes (its sender
// claims a million members) holds back only its own member, and an event
// on that member's subject waits behind it; everything else is decided at
// once. Past its limit the leader closes the batch in the log, and the
// member is decided from that point.
func TestBatchDelaysOnlyItsMembers(t *testing.T) {
	h := newHarness(t)
	var skew atomic.Int64
	wall := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	stop := h.startWith("a", wall)
	defer stop()
	h.world(10)
	h.submitBatch(&events.Batch{ID: "evil", Size: 1000000}, "member", 0)
	h.submitBatch(&events.Batch{ID: "other", Size: 2}, "finished-member", 0)
	h.publish(events.WorkloadFinished, events.WorkloadSubject("ns", "finished-member"),
		&events.WorkloadFinishedData{WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: "finished-member"}, Succeeded: true})
	h.submit("outsider", 1)

	got := h.waitAdmitted(1)
	if got["outsider"] != 1 || got["member"] != 0 || got["finished-member"] != 0 {
		t.Fatalf("admissions %v while the batches are open, want only outsider", got)
	}
	if n := len(h.ofType(events.BatchClosed, 0)); n != 0 {
		t.Fatalf("%d batches closed before their limit", n)
	}

	skew.Store(int64(batchMaxWait + time.Second))
	closed := h.ofType(events.BatchClosed, 2)
	missing := map[string]int{}
	for _, ev := range closed {
		d := ev.Data.(*events.BatchClosedData)
		missing[d.Batch] = d.Missing
	}
	if len(closed) != 2 || missing["evil"] != 999999 || missing["other"] != 1 {
		t.Errorf("closed %v (%d events), want evil missing 999999 and other missing 1", missing, len(closed))
	}
	// One instance decides in log order: once "last" is admitted, every
	// decision about what came before it is in the log.
	h.submit("last", 1)
	testenv.Eventually(t, "last admitted", 15*time.Second, func() error {
		if got = h.admissions(); got["last"] == 0 {
			return fmt.Errorf("admissions %v", got)
		}
		return nil
	})
	// finished-member's finish waited behind its submission, so it is
	// finished before any decision: never admitted.
	if got["outsider"] != 1 || got["member"] != 1 || got["finished-member"] != 0 || got["last"] != 1 {
		t.Errorf("admissions %v, want outsider, member and last once each", got)
	}
}

// TestVictimAdmittedInTheSameRun: one run admits a workload that borrows
// and then reclaims that quota from it. The request must name the victim
// at the sequence of its admission, which the preemptor's fence checks;
// named at its submission, the eviction would be refused and admission
// would wait for it forever.
func TestVictimAdmittedInTheSameRun(t *testing.T) {
	h := newHarness(t)
	stop := h.start("a")
	defer stop()
	h.config("ResourceFlavor", "", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	for _, cq := range []struct{ name, cpu string }{{"cq-a", "0"}, {"cq-b", "4"}} {
		h.config("ClusterQueue", "", cq.name, fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":%q},
		"spec":{"namespaceSelector":{},"cohort":"co","preemption":{"reclaimWithinCohort":"Any"},
		"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":%q}]}]}]}}`, cq.name, cq.cpu))
		h.config("LocalQueue", "ns", "lq-"+cq.name, fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq-%s","namespace":"ns"},"spec":{"clusterQueue":%q}}`, cq.name, cq.name))
	}
	batch := &events.Batch{ID: "all", Size: 3}
	for _, w := range []struct{ name, lq string }{{"b0", "lq-cq-b"}, {"a1", "lq-cq-a"}, {"b1", "lq-cq-b"}} {
		h.n++
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
		"spec":{"queueName":%q,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]}}}]}}`, w.name, w.lq)
		ev := events.Event{ID: fmt.Sprint("in-", h.n), Type: events.WorkloadSubmitted, Source: "test", Time: t0,
			Subject: events.WorkloadSubject("ns", w.name), Batch: batch, Data: &events.WorkloadSubmittedData{
				WorkloadRef: events.WorkloadRef{Namespace: "ns", Name: w.name}, Workload: json.RawMessage(wl),
				CreatedAt: t0.Add(time.Duration(h.n) * time.Millisecond)}}
		if _, _, err := bus.Publish(context.Background(), h.js, ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	req := h.ofType(events.PreemptionRequested, 1)[0].Data.(*events.PreemptionRequestedData)
	if req.Name != "b1" || len(req.Victims) != 1 || req.Victims[0].Name != "a1" {
		t.Fatalf("request %+v, want b1 preempting a1", req)
	}
	ctx := context.Background()
	s, err := h.js.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, events.WorkloadSubject("ns", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(events.HeaderType) != string(events.QuotaReserved) {
		t.Fatalf("a1's last event is %s, want its admission", m.Header.Get(events.HeaderType))
	}
	if req.Victims[0].Seq != m.Sequence {
		t.Errorf("victim a1 named at sequence %d, want %d (its admission)", req.Victims[0].Seq, m.Sequence)
	}
}

// TestFutureEventTimeDoesNotMoveTheClock: an event stamped in 2999 (a
// forged ce-time, or a publisher's broken clock) moves admission's clock
// by at most MaxSkew, so later decisions are stamped with today.
func TestFutureEventTimeDoesNotMoveTheClock(t *testing.T) {
	h := newHarness(t)
	stop := h.start("a")
	defer stop()
	h.world(4)
	before := time.Now()
	h.n++
	future := events.Event{ID: "future", Type: events.PodsReady, Source: "test", Time: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC),
		Subject: events.WorkloadSubject("ns", "nobody"), Data: &events.WorkloadRef{Namespace: "ns", Name: "nobody"}}
	if _, _, err := bus.Publish(context.Background(), h.js, future, nil); err != nil {
		t.Fatal(err)
	}
	h.submit("w", 1)
	ev := h.ofType(events.QuotaReserved, 1)[0]
	after := time.Now()
	if ev.Time.Before(before) || ev.Time.After(after.Add(time.Second)) {
		t.Errorf("admission stamped %s, want between %s and %s (+1s skew)", ev.Time, before, after)
	}
}

// TestFutureEventOnTheManualClockIsWaitedForOnce: on the manual clock
// admission waits for its copy of the shared clock to reach the time of
// the events it answers, but an event stamped ahead of the clock itself
// (a forged ce-time) is waited for once: the decisions that follow are
// made at once, stamped with the shared clock's time. Before, every
// decision waited out the whole bound.
func TestFutureEventOnTheManualClockIsWaitedForOnce(t *testing.T) {
	defer func(d time.Duration) { awaitClock = d }(awaitClock)
	awaitClock = 2 * time.Second
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "admission", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: h.url, Shard: "admission-0", Instance: "a", LeaseTTL: time.Second},
					ManualClock: true})
			})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	h.world(8)
	h.submit("w0", 1)
	h.ofType(events.QuotaReserved, 1)
	h.n++
	future := events.Event{ID: "future", Type: events.PodsReady, Source: "test", Time: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC),
		Subject: events.WorkloadSubject("ns", "nobody"), Data: &events.WorkloadRef{Namespace: "ns", Name: "nobody"}}
	if _, _, err := bus.Publish(context.Background(), h.js, future, nil); err != nil {
		t.Fatal(err)
	}
	h.submit("w1", 1)
	h.ofType(events.QuotaReserved, 2)
	start := time.Now()
	for i := 2; i <= 4; i++ {
		h.submit(fmt.Sprint("w", i), 1)
		h.ofType(events.QuotaReserved, i+1)
	}
	if d := time.Since(start); d >= awaitClock {
		t.Errorf("three admissions after the future event took %s, want each without waiting for the clock (%s)", d, awaitClock)
	}
	for _, ev := range h.ofType(events.QuotaReserved, 5) {
		if !ev.Time.Equal(t0) {
			t.Errorf("%s stamped %s, want the shared clock's %s", ev.Subject, ev.Time, t0)
		}
	}
}

// TestPreemptionPingPongSettles: on a shape where Kueue v0.6 itself
// preempts and re-admits one victim forever (kueue#6947;
// testdata/pingpong.yaml, from the difftest repro set), the service
// settles as the simulator does, although it decides run after run while
// a preemptor evicts what it asked for. Before, each run replayed the
// ping-pong the last one cut short, and the log grew without end.
func TestPreemptionPingPongSettles(t *testing.T) {
	h := newHarness(t)
	stop := h.start("a")
	defer stop()
	stopPreemptor := h.fakePreemptor()
	defer stopPreemptor()
	data, err := os.ReadFile("testdata/pingpong.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sim.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(objs []api.Object) {
		for _, o := range objs {
			raw, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			kind := o.GetObjectKind().GroupVersionKind().Kind
			m := o.(interface {
				GetName() string
				GetNamespace() string
			})
			if kind != "Workload" {
				h.config(kind, m.GetNamespace(), m.GetName(), string(raw))
				continue
			}
			h.n++
			h.publish(events.WorkloadSubmitted, events.WorkloadSubject(m.GetNamespace(), m.GetName()), &events.WorkloadSubmittedData{
				WorkloadRef: events.WorkloadRef{Namespace: m.GetNamespace(), Name: m.GetName()}, Workload: raw,
				CreatedAt: t0.Add(time.Duration(h.n) * time.Second)})
		}
	}
	// Each step is decided before the next, as in the simulator.
	publish(sc.Objects)
	for _, st := range sc.Steps {
		publish(append(slices.Clone(st.Apply), st.Submit...))
		h.steady(500 * time.Millisecond)
	}
	last := h.steady(3 * time.Second)
	requests, evicted := len(h.ofType(events.PreemptionRequested, 0)), len(h.ofType(events.Evicted, 0))
	t.Logf("settled at %d events: %d preemption requests, %d evictions", last, requests, evicted)
	if requests == 0 {
		t.Fatal("no preemption: the scenario did not reach its ping-pong")
	}
	if requests != evicted {
		t.Errorf("%d preemption requests but %d evictions", requests, evicted)
	}
}

// steady waits until the log has not grown for d (within 30 s) and
// returns its length.
func (h *harness) steady(d time.Duration) int {
	h.t.Helper()
	last, since := len(h.events()), time.Now()
	testenv.Eventually(h.t, "the log stops growing", 30*time.Second, func() error {
		if n := len(h.events()); n != last {
			last, since = n, time.Now()
			return fmt.Errorf("still growing at %d events", n)
		}
		if time.Since(since) < d {
			return fmt.Errorf("steady at %d events for %s", last, time.Since(since))
		}
		return nil
	})
	return last
}

// fakePreemptor evicts the victims of every PreemptionRequested, fenced on
// each victim's sequence as the preemptor service does.
func (h *harness) fakePreemptor() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		handled := map[string]bool{}
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			s, err := h.js.Stream(ctx, events.Stream)
			if err != nil {
				continue
			}
			info, err := s.Info(ctx)
			if err != nil {
				continue
			}
			for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if err != nil {
					break
				}
				ev, err := events.Parse(m.Header.Get, m.Data)
				d, ok := ev.Data.(*events.PreemptionRequestedData)
				if err != nil || !ok || handled[ev.ID] {
					continue
				}
				handled[ev.ID] = true
				for i, evc := range replay.Evictions(ev, d) {
					expect := d.Victims[i].Seq
					_, _, _ = bus.Publish(ctx, h.js, evc, &expect)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestTrackNeverGoesBack: admission tracks a workload's subject at its own
// decision when it publishes it, before it reads the decision back.
// Reading an older event of the subject after that must not move the
// position back: the next decision about the workload would be fenced at
// a stale sequence and refused (under kueue-baseline load that refused
// 18 admissions in one run; a refused admission whose run still had a
// preemption of the same workload to publish stalled admission for good).
func TestTrackNeverGoesBack(t *testing.T) {
	s := &Service{onSubj: map[string]uint64{}}
	subj := events.WorkloadSubject("ns", "w")
	s.track(subj, 10, false) // published
	s.track(subj, 7, false)  // an older event read back
	if got := s.onSubj[subj]; got != 10 {
		t.Fatalf("tracked at %d after reading back an older event, want 10", got)
	}
	s.track(subj, 12, false)
	if got := s.onSubj[subj]; got != 12 {
		t.Fatalf("tracked at %d, want 12", got)
	}
	s.track(subj, 13, true)
	if _, ok := s.onSubj[subj]; ok {
		t.Fatal("an ended workload's subject is still tracked")
	}
}

// TestRestartAfterDrainDecidesOnlyWhatIsNew: a ClusterQueue set to
// HoldAndDrain evicts its admitted workloads, which the engine decides
// while it applies the change. A new instance replays that change, and
// the eviction is in the log already: it must not publish it again, nor
// be refused for it and replay forever, and it admits the workload again
// once the queue runs.
func TestRestartAfterDrainDecidesOnlyWhatIsNew(t *testing.T) {
	h := newHarness(t)
	cq := func(policy string) {
		h.config("ClusterQueue", "", "cq", fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},
		"spec":{"namespaceSelector":{},%s"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"4"}]}]}]}}`, policy))
	}
	stop := h.start("first")
	h.world(4)
	h.submit("w1", 2)
	h.waitAdmitted(1)
	cq(`"stopPolicy":"HoldAndDrain",`)
	h.ofType(events.Evicted, 1)
	stop()
	stop2 := h.start("second")
	defer stop2()
	h.steady(time.Second)
	cq("")
	got := h.waitAdmitted(2)
	if got["w1"] != 2 {
		t.Errorf("w1 admitted %d times, want 2 (before the drain and after)", got["w1"])
	}
	h.steady(time.Second)
	if n := len(h.ofType(events.Evicted, 1)); n != 1 {
		t.Errorf("%d evictions in the log, want 1", n)
	}
}
