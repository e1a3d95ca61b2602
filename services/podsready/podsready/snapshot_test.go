package podsready

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/testenv"
	corev1 "k8s.io/api/core/v1"
)

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

func (h *harness) publish(typ events.Type, subject string, data any) {
	h.t.Helper()
	h.n++
	ev := events.Event{ID: fmt.Sprint("in-", h.n), Type: typ, Source: "test", Time: t0.Add(time.Duration(h.n) * time.Second),
		Subject: subject, Data: data}.FromOwner()
	if _, _, err := bus.Publish(context.Background(), h.js, ev, nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) config(kind, name, object string) {
	h.publish(events.ConfigApplied, events.ConfigSubject(kind, "", name), &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: kind, Name: name}, Object: json.RawMessage(object)})
}

// log: waitForPodsReady (timeout 1m, one requeue), a queue, and six
// workloads admitted a second apart; two report PodsReady.
func (h *harness) log() {
	h.publish(events.ConfigApplied, events.ConfigSubject("Configuration", "", "config"), &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: "Configuration", Name: "config"},
		Object: json.RawMessage(`{"apiVersion":"config.kueue.x-k8s.io/v1beta1","kind":"Configuration",
			"waitForPodsReady":{"enable":true,"timeout":"1m","requeuingStrategy":{"backoffLimitCount":1,"backoffBaseSeconds":30}}}`)})
	h.config("ResourceFlavor", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	h.config("ClusterQueue", "cq", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},
		"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"10"}]}]}]}}`)
	h.publish(events.ConfigApplied, events.ConfigSubject("LocalQueue", "ns", "lq"), &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: "LocalQueue", Namespace: "ns", Name: "lq"},
		Object:    json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)})
	for i := range 6 {
		name := fmt.Sprint("w", i)
		ref := events.WorkloadRef{Namespace: "ns", Name: name}
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
			"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name)
		h.publish(events.WorkloadSubmitted, events.WorkloadSubject("ns", name), &events.WorkloadSubmittedData{WorkloadRef: ref,
			Workload: json.RawMessage(wl), CreatedAt: t0})
		h.publish(events.QuotaReserved, events.WorkloadSubject("ns", name), &events.QuotaReservedData{WorkloadRef: ref,
			Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
				Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "rf"}, Usage: map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000}}}}})
		if i%3 == 0 {
			h.publish(events.PodsReady, events.WorkloadSubject("ns", name), &ref)
		}
	}
}

// run runs an instance whose clock reads now until stop.
func (h *harness) run(now time.Time, policy snapshot.Policy) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, "podsready", service.Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				return Run(ctx, rt, Config{Member: bus.Member{NATSURL: h.url, Shard: "podsready-0", Instance: "test", LeaseTTL: time.Second},
					Now: func() time.Time { return now }, Snapshot: policy})
			})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("podsready: %v", err)
		}
	}
}

func (h *harness) lastSeq() uint64 {
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

// published renders podsready's events after seq.
func (h *harness) published(after uint64) []string {
	s, _ := h.js.Stream(context.Background(), events.Stream)
	var out []string
	for n := after + 1; n <= h.lastSeq(); n++ {
		m, err := s.GetMsg(context.Background(), n)
		if err != nil {
			h.t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			h.t.Fatal(err)
		}
		data, _ := json.Marshal(ev.Data)
		out = append(out, fmt.Sprintf("%s %s %s %s %s", ev.ID, ev.Type, ev.Time.Format(time.RFC3339), m.Subject, data))
	}
	return out
}

// load reads podsready-0's snapshot.
func (h *harness) load() *snapshot.Snapshot {
	store, err := snapshot.Open(context.Background(), h.js, snapshot.Options{Name: "podsready-0", Version: snapshotVersion})
	if err != nil {
		h.t.Fatal(err)
	}
	sn, err := store.Load(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return sn
}

// fold reads the log up to seq into a fresh replica and encodes it.
func (h *harness) fold(seq uint64) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &Service{cfg: Config{Now: func() time.Time { return t0 }}, log: zap.NewNop(), js: h.js, rt: &service.Runtime{Log: zap.NewNop()}}
	s.eng, s.onSubj = engine.New(), map[string]uint64{}
	cons, err := h.js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		h.t.Fatal(err)
	}
	for s.last < seq {
		if _, err := s.consume(ctx, cons); err != nil {
			h.t.Fatal(err)
		}
	}
	payload, err := s.encodeState()
	if err != nil {
		h.t.Fatal(err)
	}
	return payload
}

// TestRestartFromSnapshotFiresAsFullReplay: the same log in two
// JetStreams; podsready runs over both before any timer is due (writing a
// snapshot on one only), stops, and starts again once the timeouts are
// due: restored from the snapshot, it publishes exactly what the one
// that replays the whole log publishes.
func TestRestartFromSnapshotFiresAsFullReplay(t *testing.T) {
	withSnap, without := newHarness(t), newHarness(t)
	for _, h := range []*harness{withSnap, without} {
		h.log()
		policy := snapshot.Policy{}
		if h == withSnap {
			policy = snapshot.Policy{Events: 1}
		}
		stop := h.run(t0, policy)
		if h == withSnap {
			testenv.Eventually(t, "a snapshot", 10*time.Second, func() error {
				if sn := h.load(); sn == nil || sn.Seq != h.lastSeq() {
					return fmt.Errorf("no snapshot at %d yet", h.lastSeq())
				}
				return nil
			})
		}
		stop()
	}
	sn := withSnap.load()
	// 4 configuration objects, 6 submissions, 6 admissions, 2 PodsReady.
	if sn.Seq != 18 {
		t.Fatalf("snapshot at %d, want 18", sn.Seq)
	}
	if want := withSnap.fold(sn.Seq); string(sn.Payload) != string(want) {
		t.Fatalf("the snapshot is not the fold of the log:\n%s\nwant\n%s", sn.Payload, want)
	}
	if without.load() != nil {
		t.Fatal("a snapshot where none was to be written")
	}
	var got [2][]string
	for i, h := range []*harness{withSnap, without} {
		stop := h.run(t0.Add(5*time.Minute), snapshot.Policy{})
		// Four workloads never became ready: each times out.
		testenv.Eventually(t, "timeouts", 10*time.Second, func() error {
			if n := len(h.published(18)); n < 4 {
				return fmt.Errorf("%d events, want at least 4", n)
			}
			return nil
		})
		stop()
		got[i] = h.published(18)
	}
	if len(got[1]) != 4 {
		t.Fatalf("%d events from the whole log, want the 4 timeouts: %v", len(got[1]), got[1])
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Fatalf("from the snapshot:\n%v\nfrom the whole log:\n%v", got[0], got[1])
	}
}
