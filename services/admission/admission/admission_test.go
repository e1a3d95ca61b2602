package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/service"
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
func (h *harness) start(instance string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "admission", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: h.url, Shard: "admission-0", Instance: instance, LeaseTTL: time.Second}})
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
	ev := events.Event{ID: fmt.Sprint("in-", h.n), Type: typ, Source: "test", Time: t0, Subject: subject, Data: data}
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
	stopA := h.start("a")
	h.world(10)
	h.submit("w0", 1)
	h.waitAdmitted(1)
	stopB := h.start("b")
	defer stopB()
	stopA()
	h.submit("w1", 1)
	got := h.waitAdmitted(2)
	if got["w0"] != 1 || got["w1"] != 1 {
		t.Errorf("admissions %v", got)
	}
}
