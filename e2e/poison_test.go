package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

// Poison events: a valid CloudEvent (every ce-* header right) whose
// content a service cannot apply, written straight into JQ_EVENTS with a
// plain JetStream publish, as any client reaching NATS could. Each test
// puts poison ahead of ordinary events and checks that the service skips
// the poison by the services' rule (counted, shown in /readyz), keeps
// running, and does exactly what the ordinary events ask.

// poisonLog is a bare NATS with JQ_EVENTS, written to by hand.
type poisonLog struct {
	*system
	t  *testing.T
	js jetstream.JetStream
	n  int
}

func newPoisonLog(t *testing.T) *poisonLog {
	t.Helper()
	s := &system{t: t, nats: testenv.NATS(t).ClientURL()}
	t.Cleanup(s.close)
	nc, err := bus.Connect(s.nats, "poisoner")
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
	return &poisonLog{system: s, t: t, js: js}
}

// publish writes a well-formed event and returns its stream sequence.
func (l *poisonLog) publish(subject string, typ events.Type, data any) uint64 {
	l.t.Helper()
	body, err := json.Marshal(data)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.raw(subject, typ, body)
}

// raw writes an event with valid CloudEvents headers and the given body,
// which need not decode into typ's payload.
func (l *poisonLog) raw(subject string, typ events.Type, body []byte) uint64 {
	l.t.Helper()
	l.n++
	ev := events.Event{ID: fmt.Sprintf("poison-test/%d", l.n), Type: typ, Source: "test", Time: clock0, Subject: subject}.FromOwner()
	msg := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: body}
	for k, v := range ev.Headers() {
		msg.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := l.js.PublishMsg(ctx, msg)
	if err != nil {
		l.t.Fatal(err)
	}
	return ack.Sequence
}

// instance is one service started in-process, with its runtime at hand.
type instance struct {
	rt     *service.Runtime
	exited chan error
}

// runInstance starts a service through the shared runtime; the system
// stops it at cleanup.
func (l *poisonLog) runInstance(name string, main service.Main) *instance {
	l.t.Helper()
	rts := make(chan *service.Runtime, 1)
	in := &instance{exited: make(chan error, 1)}
	l.run(name, func(ctx context.Context, rt *service.Runtime) error {
		rts <- rt
		err := main(ctx, rt)
		in.exited <- err
		return err
	})
	in.rt = <-rts
	return in
}

// checkSkipped asserts that the instance is still running and has
// skipped exactly want events, as its metric and /readyz say.
func (in *instance) checkSkipped(t *testing.T, want int) {
	t.Helper()
	select {
	case err := <-in.exited:
		t.Fatalf("%s exited: %v", in.rt.Name, err)
	default:
	}
	if n, last := in.rt.Skipped(); n != uint64(want) {
		t.Errorf("%s skipped %d events (last: %s), want %d", in.rt.Name, n, last, want)
	}
	metrics := in.get(t, "/metrics")
	if got := skippedTotal(t, metrics); got != want {
		t.Errorf("%s: jetqueue_events_skipped_total sums to %d, want %d", in.rt.Name, got, want)
	}
	ready := in.get(t, "/readyz")
	if wantLine := fmt.Sprintf("skipped %d event(s) that could not be applied", want); !strings.Contains(ready, wantLine) {
		t.Errorf("%s /readyz says %q, want it to contain %q", in.rt.Name, ready, wantLine)
	}
}

// get reads an admin endpoint, which must answer 200.
func (in *instance) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + in.rt.AdminAddr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", in.rt.Name, path, resp.StatusCode, body)
	}
	return string(body)
}

// skippedTotal sums jetqueue_events_skipped_total over its labels in a
// Prometheus text exposition.
func skippedTotal(t *testing.T, exposition string) int {
	t.Helper()
	total := 0
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "jetqueue_events_skipped_total") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}

// count is how many events of a type the log holds on a subject.
func (l *poisonLog) count(typ events.Type, subject string) int {
	l.t.Helper()
	n := 0
	l.scanWith(func(ev events.Event) {
		if ev.Type == typ && ev.Subject == subject {
			n++
		}
	}, ignore)
	return n
}

// caughtUp waits until a service's progress mark reaches the end of the
// log: it has handled every event, poison included.
func (l *poisonLog) caughtUp(service string) {
	l.t.Helper()
	poll(l.t, service+" caught up", func() error {
		last := l.streamState().LastSeq
		if got := l.marks()[service].Seq; got < last {
			return fmt.Errorf("progress %d of %d", got, last)
		}
		return nil
	})
}

// ignore passes over the poison that does not decode when reading the log.
func ignore(uint64, error) {}

func poisonRef(name string) events.WorkloadRef {
	return events.WorkloadRef{Namespace: "ns", Name: name}
}

func poisonSubject(name string) string { return events.WorkloadSubject("ns", name) }

func cpuAdmission() scheduler.Admission {
	return scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
		Flavors: map[corev1.ResourceName]string{"cpu": "default"}, Usage: map[corev1.ResourceName]int64{"cpu": 1000}}}}
}

// TestPoisonEventsDoNotStopThePreemptor: preemption requests that do not
// decode, name a victim that never existed, or name one at an impossible
// sequence are skipped; the request after them evicts its victim once.
func TestPoisonEventsDoNotStopThePreemptor(t *testing.T) {
	l := newPoisonLog(t)
	l.raw(poisonSubject("p0"), events.PreemptionRequested, []byte(`{"victims":"everyone"}`))
	l.publish(poisonSubject("p1"), events.PreemptionRequested, &events.PreemptionRequestedData{WorkloadRef: poisonRef("p1"),
		ClusterQueue: "cq", Victims: []events.Victim{{WorkloadRef: poisonRef("ghost"), ClusterQueue: "cq", Seq: 1}}})
	l.publish(poisonSubject("p2"), events.PreemptionRequested, &events.PreemptionRequestedData{WorkloadRef: poisonRef("p2"),
		ClusterQueue: "cq", Victims: []events.Victim{{WorkloadRef: poisonRef("ghost"), ClusterQueue: "cq", Seq: 0}}})
	steady := l.publish(poisonSubject("steady"), events.QuotaReserved,
		&events.QuotaReservedData{WorkloadRef: poisonRef("steady"), Admission: cpuAdmission()})
	l.publish(poisonSubject("high"), events.PreemptionRequested, &events.PreemptionRequestedData{WorkloadRef: poisonRef("high"),
		ClusterQueue: "cq", Victims: []events.Victim{{WorkloadRef: poisonRef("steady"), ClusterQueue: "cq", Seq: steady}}})

	in := l.runInstance("preemptor", func(ctx context.Context, rt *service.Runtime) error {
		return preemptor.Run(ctx, rt, preemptor.Config{Member: l.member("preemptor", "a")})
	})
	poll(t, "steady evicted", func() error {
		if n := l.count(events.Evicted, poisonSubject("steady")); n != 1 {
			return fmt.Errorf("%d evictions", n)
		}
		return nil
	})
	l.caughtUp("preemptor")
	evicted := 0
	l.scanWith(func(ev events.Event) {
		if ev.Type == events.Evicted {
			evicted++
		}
	}, ignore)
	if evicted != 1 {
		t.Errorf("%d Evicted events in the log, want 1 (steady's)", evicted)
	}
	in.checkSkipped(t, 3)
}

// TestPoisonEventsDoNotStopPodsReady: a submission whose workload does not
// decode, an admission and an eviction of workloads that never existed and
// an admission whose payload does not decode are skipped; the admitted
// workload after them still times out, once.
func TestPoisonEventsDoNotStopPodsReady(t *testing.T) {
	l := newPoisonLog(t)
	for _, obj := range []string{
		`{"apiVersion":"config.kueue.x-k8s.io/v1beta1","kind":"Configuration","waitForPodsReady":{"enable":true,"timeout":"5m","blockAdmission":false}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"10"}]}]}]}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`,
	} {
		var meta struct{ Kind string }
		_ = json.Unmarshal([]byte(obj), &meta)
		l.publish(events.ConfigSubject(meta.Kind, "", meta.Kind), events.ConfigApplied,
			&events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: meta.Kind, Name: meta.Kind}, Object: json.RawMessage(obj)})
	}
	l.publish(poisonSubject("garbled"), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: poisonRef("garbled"),
		Workload: json.RawMessage(`{"spec":{"podSets":"many"}}`), CreatedAt: clock0})
	l.publish(poisonSubject("ghost"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: poisonRef("ghost"), Admission: cpuAdmission()})
	l.publish(poisonSubject("ghost2"), events.Evicted, &events.EvictedData{WorkloadRef: poisonRef("ghost2"), Reason: "Preempted"})
	l.raw(poisonSubject("ghost3"), events.QuotaReserved, []byte(`[1,2,3]`))

	wl := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w1","namespace":"ns"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
	l.publish(poisonSubject("w1"), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: poisonRef("w1"),
		Workload: json.RawMessage(wl), CreatedAt: clock0})
	l.publish(poisonSubject("w1"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: poisonRef("w1"), Admission: cpuAdmission()})

	// The clock stands past w1's deadline and before the end of its
	// backoff: exactly one timer is due.
	now := clock0.Add(10 * time.Minute)
	in := l.runInstance("podsready", func(ctx context.Context, rt *service.Runtime) error {
		return podsready.Run(ctx, rt, podsready.Config{Member: l.member("podsready", "a"), Now: func() time.Time { return now }})
	})
	poll(t, "w1 evicted", func() error {
		if n := l.count(events.Evicted, poisonSubject("w1")); n != 1 {
			return fmt.Errorf("%d evictions", n)
		}
		return nil
	})
	l.caughtUp("podsready")
	var published []string
	l.scanWith(func(ev events.Event) {
		if ev.Source == "jetqueue/podsready" {
			published = append(published, fmt.Sprintf("%s %s", ev.Type, ev.Subject))
		}
	}, ignore)
	if want := []string{fmt.Sprintf("%s %s", events.Evicted, poisonSubject("w1"))}; fmt.Sprint(published) != fmt.Sprint(want) {
		t.Errorf("podsready published %q, want %q", published, want)
	}
	in.checkSkipped(t, 4)
}

// TestPoisonEventsDoNotStopTheScorer: a submission whose workload does not
// decode, an admission and an eviction of workloads that never existed and
// an admission whose payload does not decode are skipped; the admission
// after them is placed, once.
func TestPoisonEventsDoNotStopTheScorer(t *testing.T) {
	l := newPoisonLog(t)
	l.withJS(func(ctx context.Context, js jetstream.JetStream) {
		kv, err := scorer.NodesKV(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, scorer.NodeKey("n1"), []byte(`{"name":"n1","allocatable":{"cpu":"8"}}`)); err != nil {
			t.Fatal(err)
		}
	})
	l.publish(events.ConfigSubject("ResourceFlavor", "", "default"), events.ConfigApplied, &events.ConfigAppliedData{
		ConfigRef: events.ConfigRef{Kind: "ResourceFlavor", Name: "default"},
		Object:    json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}}`)})
	l.publish(poisonSubject("garbled"), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: poisonRef("garbled"),
		Workload: json.RawMessage(`{"kind":"Workload","spec":{"podSets":"many"}}`), CreatedAt: clock0})
	l.publish(poisonSubject("ghost"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: poisonRef("ghost"), Admission: cpuAdmission()})
	l.publish(poisonSubject("ghost2"), events.Evicted, &events.EvictedData{WorkloadRef: poisonRef("ghost2"), Reason: "Preempted"})
	l.raw(poisonSubject("ghost3"), events.QuotaReserved, []byte(`[1,2,3]`))

	wl := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w1","namespace":"ns"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
	l.publish(poisonSubject("w1"), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: poisonRef("w1"),
		Workload: json.RawMessage(wl), CreatedAt: clock0})
	l.publish(poisonSubject("w1"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: poisonRef("w1"), Admission: cpuAdmission()})

	in := l.runInstance("scorer", func(ctx context.Context, rt *service.Runtime) error {
		return scorer.Run(ctx, rt, scorer.Config{NATSURL: l.nats, Instance: "a", Inventory: scorer.InventoryKV})
	})
	placed := events.PlacedSubject("ns", "w1")
	poll(t, "w1 placed", func() error {
		if n := l.count(events.Placed, placed); n != 1 {
			return fmt.Errorf("%d Placed events", n)
		}
		return nil
	})
	// The durable consumer has handed out and acknowledged everything,
	// the poison included.
	poll(t, "scorer done", func() error {
		var info *jetstream.ConsumerInfo
		l.withJS(func(ctx context.Context, js jetstream.JetStream) {
			c, err := js.Consumer(ctx, events.Stream, scorer.Durable)
			if err != nil {
				t.Fatal(err)
			}
			if info, err = c.Info(ctx); err != nil {
				t.Fatal(err)
			}
		})
		if info.NumPending+uint64(info.NumAckPending) > 0 {
			return fmt.Errorf("%d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	var published []string
	l.scanWith(func(ev events.Event) {
		if ev.Source == "jetqueue/scorer" {
			published = append(published, fmt.Sprintf("%s %s", ev.Type, ev.Subject))
		}
	}, ignore)
	if want := []string{fmt.Sprintf("%s %s", events.Placed, placed)}; fmt.Sprint(published) != fmt.Sprint(want) {
		t.Errorf("scorer published %q, want %q", published, want)
	}
	in.checkSkipped(t, 4)
}
