package podsready

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestSubjectPositionsForgetEndedWorkloads: podsready keeps the position
// of live workloads' subjects only (its timers' events are fenced there),
// not of configuration or placement subjects, and forgets a workload's
// once it is deleted or expires.
func TestSubjectPositionsForgetEndedWorkloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := bus.Open(ctx, testenv.NATS(t).ClientURL(), "test", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := 0
	publish := func(subject string, typ events.Type, data any) {
		t.Helper()
		n++
		ev := events.Event{ID: fmt.Sprint("test-", n), Type: typ, Source: "test", Time: t0, Subject: subject, Data: data}.FromOwner()
		if _, _, err := bus.Publish(ctx, conn.JS, ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	rf := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}}`
	publish(events.ConfigSubject("ResourceFlavor", "", "default"), events.ConfigApplied,
		&events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "ResourceFlavor", Name: "default"}, Object: json.RawMessage(rf)})
	ref := func(name string) events.WorkloadRef { return events.WorkloadRef{Namespace: "ns", Name: name} }
	for _, name := range []string{"a", "b"} {
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},"spec":{"queueName":"lq"}}`, name)
		publish(events.WorkloadSubject("ns", name), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref(name), Workload: json.RawMessage(wl), CreatedAt: t0})
	}
	publish(events.PlacedSubject("ns", "a"), events.Placed, &events.PlacedData{WorkloadRef: ref("a")})
	publish(events.WorkloadSubject("ns", "b"), events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref("b")})

	s := &Service{log: zap.NewNop(), js: conn.JS, eng: engine.New(), onSubj: map[string]uint64{}}
	cons, err := conn.JS.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	consume := func(through int) {
		t.Helper()
		for s.last < uint64(through) {
			if _, err := s.consume(ctx, cons); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume(n)
	want := []string{events.WorkloadSubject("ns", "a"), events.WorkloadSubject("ns", "b")}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(s.onSubj)); !slices.Equal(got, want) {
		t.Errorf("positions kept %v, want the two workloads' subjects %v", got, want)
	}
	publish(events.WorkloadSubject("ns", "a"), events.WorkloadDeleted, &events.WorkloadRef{Namespace: "ns", Name: "a"})
	publish(events.WorkloadSubject("ns", "b"), events.WorkloadExpired, &events.WorkloadRef{Namespace: "ns", Name: "b"})
	consume(n)
	if len(s.onSubj) != 0 || len(s.eng.Workloads()) != 0 {
		t.Errorf("after both ended: positions %v, engine workloads %d; want none", s.onSubj, len(s.eng.Workloads()))
	}
}
