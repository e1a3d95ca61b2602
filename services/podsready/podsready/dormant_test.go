package podsready

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestDormantUntilWaitForPodsReadyIsOn: with waitForPodsReady off, the
// service reads configuration events only and passes over the workloads'
// events unread. When a Configuration turns it on, it rebuilds from the log
// and holds the same timers as a replica that read everything: here the
// timeout of a workload admitted while it was off.
func TestDormantUntilWaitForPodsReadyIsOn(t *testing.T) {
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
	config := func(obj string) {
		var meta struct{ Kind string }
		_ = json.Unmarshal([]byte(obj), &meta)
		publish(events.ConfigSubject(meta.Kind, "", meta.Kind), events.ConfigApplied,
			&events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: meta.Kind, Name: meta.Kind}, Object: json.RawMessage(obj)})
	}
	for _, obj := range []string{
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"10"}]}]}]}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`,
	} {
		config(obj)
	}
	ref := events.WorkloadRef{Namespace: "ns", Name: "w1"}
	wl := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w1","namespace":"ns"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
	publish(events.WorkloadSubject("ns", "w1"), events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(wl), CreatedAt: t0})
	publish(events.WorkloadSubject("ns", "w1"), events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref,
		Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
			Flavors: map[corev1.ResourceName]string{"cpu": "default"}, Usage: map[corev1.ResourceName]int64{"cpu": 1000}}}}})

	s := &Service{log: zap.NewNop(), js: conn.JS}
	s.reset()
	// drain reads the stream from the start until caught up, returning
	// the first error.
	drain := func(s *Service) error {
		s.reset()
		cons, err := conn.JS.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for caughtUp := false; !caughtUp; {
			if caughtUp, err = s.consume(ctx, cons); err != nil {
				return err
			}
		}
		return nil
	}
	if err := drain(s); err != nil {
		t.Fatal(err)
	}
	if s.dormant != 2 {
		t.Fatalf("with waitForPodsReady off, %d events passed over unread, want the workload's 2", s.dormant)
	}
	if s.eng.Workload("ns/w1") != nil {
		t.Fatal("a workload event was read while waitForPodsReady was off")
	}

	config(`{"apiVersion":"config.kueue.x-k8s.io/v1beta1","kind":"Configuration","waitForPodsReady":{"enable":true,"timeout":"5m","blockAdmission":false}}`)
	if err := drain(s); !errors.Is(err, errRebuild) {
		t.Fatalf("turning waitForPodsReady on: %v, want errRebuild", err)
	}
	s.full = true // as Run does on errRebuild
	if err := drain(s); err != nil {
		t.Fatal(err)
	}
	everything := &Service{log: zap.NewNop(), js: conn.JS, full: true, eng: engine.New()}
	if err := drain(everything); err != nil {
		t.Fatal(err)
	}
	deadline := t0.Add(5 * time.Minute)
	got, want := s.eng.DueTimers(deadline), everything.eng.DueTimers(deadline)
	if len(want) != 1 || !cmp.Equal(got, want, cmpopts.IgnoreUnexported(engine.Timer{})) {
		t.Fatalf("timers due after the rebuild %v, want those of a replica that read everything %v (one)", got, want)
	}
}
