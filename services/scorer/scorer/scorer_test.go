package scorer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/service"
)

// harness is a real nats-server with JQ_EVENTS and JQ_NODES, and scorer
// instances run through the shared service runtime.
type harness struct {
	t   *testing.T
	url string
	js  jetstream.JetStream
	kv  jetstream.KeyValue
}

func newHarness(t *testing.T) *harness {
	url, js := natsJS(t)
	ctx := context.Background()
	if _, err := bus.EnsureStream(ctx, js, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := NodesKV(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, url: url, js: js, kv: kv}
}

// start runs one scorer until the returned stop is called, and waits for
// its /readyz.
func (h *harness) start(instance string) (stop func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	rts := make(chan *service.Runtime, 1)
	go func() {
		done <- service.RunContext(ctx, "scorer", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				rts <- rt
				return Run(ctx, rt, Config{NATSURL: h.url, Instance: instance, Inventory: InventoryKV})
			})
	}()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("%s: %v", instance, err)
		}
	}
	var rt *service.Runtime
	select {
	case rt = <-rts:
	case err := <-done:
		h.t.Fatalf("%s did not start: %v", instance, err)
	}
	h.eventually(instance+" ready", func() bool {
		resp, err := http.Get("http://" + rt.AdminAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return stop
}

// eventually polls the real server until cond holds or a deadline passes.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) publish(ev events.Event) {
	h.t.Helper()
	ev.Source, ev.Time = "test", t0
	if _, _, err := bus.Publish(context.Background(), h.js, ev.FromOwner(), nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) admit(id, name string, ad ...scheduler.PodSetAdmission) {
	h.publish(events.Event{ID: id, Type: events.QuotaReserved, Subject: events.WorkloadSubject("team", name),
		Data: &events.QuotaReservedData{WorkloadRef: events.WorkloadRef{Namespace: "team", Name: name},
			Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: ad}}})
}

// placed reads the whole stream and returns the Placed events by workload
// name, with their ids.
func (h *harness) placed() map[string][]events.Event {
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
	out := map[string][]events.Event{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			h.t.Fatal(err)
		}
		if d, ok := ev.Data.(*events.PlacedData); ok {
			if m.Subject != events.PlacedSubject(d.Namespace, d.Name) {
				h.t.Errorf("Placed for %s/%s on subject %s", d.Namespace, d.Name, m.Subject)
			}
			out[d.Name] = append(out[d.Name], ev)
		}
	}
	return out
}

// waitPlaced waits until name has n Placed events and returns them.
func (h *harness) waitPlaced(name string, n int) []events.Event {
	h.t.Helper()
	var got []events.Event
	h.eventually(fmt.Sprintf("%d Placed events for %s", n, name), func() bool {
		got = h.placed()[name]
		return len(got) >= n
	})
	return got
}

func placements(ev events.Event) []events.PodSetPlacement {
	return ev.Data.(*events.PlacedData).PodSets
}

const tolerateGPU = `[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]`

// TestPlacedEndToEnd: an admitted workload gets a Placed event naming real
// nodes of its flavor; one that fits nowhere gets NoFeasibleNode; a
// restart rebuilds what it needs from the log and a redelivered admission
// is not placed twice.
func TestPlacedEndToEnd(t *testing.T) {
	h := newHarness(t)
	for name, state := range map[string]string{
		"gpu-a": `{"name":"gpu-a","labels":{"pool":"gpu"},"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}],
			"allocatable":{"cpu":"32","nvidia.com/gpu":"8"},"requested":{"cpu":"4","nvidia.com/gpu":"2"}}`,
		"gpu-b": `{"name":"gpu-b","labels":{"pool":"gpu"},"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}],
			"allocatable":{"cpu":"32","nvidia.com/gpu":"8"}}`,
		"cpu-a": `{"name":"cpu-a","labels":{"pool":"cpu"},"allocatable":{"cpu":"64","memory":"256Gi"}}`,
	} {
		putNode(t, h.kv, name, state)
	}
	h.publish(flavorApplied("gpu", `{"pool":"gpu"}`, tolerateGPU))
	h.publish(submittedEvent("team", "train", podSetJSON("workers", 4, "cpu=4,nvidia.com/gpu=2", "")))
	h.publish(submittedEvent("team", "huge", podSetJSON("main", 1, "nvidia.com/gpu=64", "")))

	stop := h.start("first")
	h.admit("qr-train", "train", psa("workers", 4, gpuFlavor("cpu", "nvidia.com/gpu")))
	train := h.waitPlaced("train", 1)
	if train[0].ID != PlacedID("qr-train") {
		t.Errorf("Placed id %q, want %q", train[0].ID, PlacedID("qr-train"))
	}
	if !train[0].Time.Equal(t0) {
		t.Errorf("Placed stamped %s, want the admission's time %s", train[0].Time, t0)
	}
	// The default profile (gpu MostAllocated 2, cpu and memory
	// LeastAllocated 1) gives the same scores as TestPlace: memory is not
	// requested, so it is not scored.
	want := []events.PodSetPlacement{{Name: "workers", Nodes: []events.NodeScore{
		ns("gpu-a", 58, 100), ns("gpu-a", 70, 100), ns("gpu-a", 83, 100), ns("gpu-b", 45, 100)}}}
	if d := cmp.Diff(want, placements(train[0])); d != "" {
		t.Errorf("train placement (-want +got):\n%s", d)
	}

	h.admit("qr-huge", "huge", psa("main", 1, gpuFlavor("nvidia.com/gpu")))
	huge := h.waitPlaced("huge", 1)
	want = []events.PodSetPlacement{{Name: "main", Reason: ReasonNoFeasibleNode, Filter: "InsufficientResource nvidia.com/gpu"}}
	if d := cmp.Diff(want, placements(huge[0])); d != "" {
		t.Errorf("huge placement (-want +got):\n%s", d)
	}

	t.Run("ranking query", func(t *testing.T) {
		nc, err := nats.Connect(h.url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// Against the live inventory: cpu-a spreads best for a cpu pod.
		m, err := nc.Request(SubjectScore, []byte(`{"pod":{"requests":{"cpu":"8"}}}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if s := m.Header.Get("Status"); s != "200" {
			t.Errorf("status %s", s)
		}
		var got struct{ Ranking []struct{ Node string } }
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, r := range got.Ranking {
			order = append(order, r.Node)
		}
		if d := cmp.Diff([]string{"cpu-a", "gpu-b", "gpu-a"}, order); d != "" {
			t.Errorf("order (-want +got):\n%s\n%s", d, m.Data)
		}
		m, err = nc.Request(SubjectScore, []byte(scorerExample), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(m.Data), `{"ranking":[{"node":"n1","fitPlus":72,"scarce":100,"total":172}]}`; got != want || m.Header.Get("Status") != "200" {
			t.Errorf("answer %s %s, want 200 %s", m.Header.Get("Status"), got, want)
		}
		m, err = nc.Request(SubjectScore, []byte(`{"pod":{},"config":{"fitPlus":{"cpu":{"type":"Best"}}}}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Status") != "400" {
			t.Errorf("invalid config answered %s %s", m.Header.Get("Status"), m.Data)
		}
	})

	// Submitted while the scorer is down, admitted after it restarts: the
	// new instance knows the pod template from the log.
	stop()
	h.publish(submittedEvent("team", "late", podSetJSON("main", 1, "cpu=2", "")))
	h.publish(flavorApplied("cpu", `{"pool":"cpu"}`, `[]`))
	// Redelivery: a fresh durable consumer hands out every admission again.
	ctx := context.Background()
	if err := h.js.DeleteConsumer(ctx, events.Stream, Durable); err != nil {
		t.Fatal(err)
	}
	stop = h.start("second")
	defer stop()
	h.admit("qr-late", "late", psa("main", 1, map[corev1.ResourceName]string{"cpu": "cpu"}))
	late := h.waitPlaced("late", 1)
	want = []events.PodSetPlacement{{Name: "main", Nodes: []events.NodeScore{ns("cpu-a", 96, 100)}}}
	if d := cmp.Diff(want, placements(late[0])); d != "" {
		t.Errorf("late placement (-want +got):\n%s", d)
	}
	// late was admitted after the redelivered admissions, and the
	// consumer hands them out in order: had they been placed again, those
	// Placed events would be in the stream by now.
	got := h.placed()
	for name, evs := range got {
		if len(evs) != 1 {
			t.Errorf("%s has %d Placed events, want 1", name, len(evs))
		}
	}
	if len(got) != 3 {
		t.Errorf("Placed events for %d workloads, want 3 (train, huge, late)", len(got))
	}
}
