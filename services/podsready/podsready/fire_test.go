package podsready

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestRefusedBatchMemberIsStoodInFor: two timeouts fall due at one
// instant and go out as one batch; one workload's pods became ready after
// the replica read it, so its fence refuses the eviction. A BatchSkipped
// takes the eviction's place in the batch, so admission, which counts the
// batch's members, does not wait for one that will never come.
func TestRefusedBatchMemberIsStoodInFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := bus.Open(ctx, testenv.NATS(t).ClientURL(), "test", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	publish := func(subject string, typ events.Type, data any) {
		t.Helper()
		id := fmt.Sprintf("test/%s/%s", subject, typ)
		if _, _, err := bus.Publish(ctx, conn.JS, events.Event{ID: id, Type: typ, Source: "test", Time: t0, Subject: subject, Data: data}.FromOwner(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range []string{
		`{"apiVersion":"config.kueue.x-k8s.io/v1beta1","kind":"Configuration","waitForPodsReady":{"enable":true,"timeout":"5m","blockAdmission":false}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"10"}]}]}]}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`,
	} {
		var meta struct{ Kind string }
		_ = json.Unmarshal([]byte(obj), &meta)
		publish(events.ConfigSubject(meta.Kind, "", meta.Kind), events.ConfigApplied,
			&events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: meta.Kind, Name: meta.Kind}, Object: json.RawMessage(obj)})
	}
	for _, name := range []string{"w1", "w2"} {
		ref := events.WorkloadRef{Namespace: "ns", Name: name}
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name)
		publish(events.WorkloadSubject("ns", name), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(wl), CreatedAt: t0})
		publish(events.WorkloadSubject("ns", name), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref,
			Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
				Flavors: map[corev1.ResourceName]string{"cpu": "default"}, Usage: map[corev1.ResourceName]int64{"cpu": 1000}}}}})
	}

	leases, ttl, err := bus.EnsureLeaseBucket(ctx, conn.JS, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{log: zap.NewNop(), js: conn.JS, leader: bus.NewLeadership(leases, "podsready-0", "test", ttl),
		eng: engine.New(), onSubj: map[string]uint64{}}
	if leading, err := s.leader.Lead(ctx); err != nil || !leading {
		t.Fatalf("lead: %v %v", leading, err)
	}
	defer s.leader.Release()
	cons, err := conn.JS.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for caughtUp := false; !caughtUp; {
		if caughtUp, err = s.consume(ctx, cons); err != nil {
			t.Fatal(err)
		}
	}
	deadline := t0.Add(5 * time.Minute)
	if due := s.eng.DueTimers(deadline); len(due) != 2 {
		t.Fatalf("%d timers due at the deadline, want 2", len(due))
	}
	publish(events.WorkloadSubject("ns", "w1"), events.PodsReady, &events.WorkloadRef{Namespace: "ns", Name: "w1"})
	before := s.last + 1 // the PodsReady

	if err := s.fire(ctx, deadline); err != nil {
		t.Fatal(err)
	}
	var got []string
	for seq := before + 1; ; seq++ {
		msg, err := conn.Stream.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		ev, err := events.Parse(msg.Header.Get, msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %s", ev.Type, ev.Subject)
		if ev.Batch != nil {
			line += fmt.Sprintf(" batch of %d", ev.Batch.Size)
		}
		if d, ok := ev.Data.(*events.BatchSkippedData); ok {
			line += fmt.Sprintf(" for %s on %s", d.Type, d.Subject)
		}
		got = append(got, line)
	}
	want := []string{
		fmt.Sprintf("%s %s batch of 2 for %s on %s", events.BatchSkipped, events.BatchSubject, events.Evicted, events.WorkloadSubject("ns", "w1")),
		fmt.Sprintf("%s %s batch of 2", events.Evicted, events.WorkloadSubject("ns", "w2")),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("published\n%q\nwant\n%q", got, want)
	}
}
