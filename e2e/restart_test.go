package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// oneQueue is a ResourceFlavor, one ClusterQueue with cpu quota and a
// LocalQueue "lq" in namespace "ns".
func oneQueue(cpu string) string {
	return fmt.Sprintf(`
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
      resources: [{name: cpu, nominalQuota: %q}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
`, cpu)
}

var restartWorld = oneQueue("50")

func cpuWorkload(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name)
}

// decisionsPerWorkload counts QuotaReserved events per workload name.
func (s *system) decisionsPerWorkload() map[string]int {
	s.t.Helper()
	out := map[string]int{}
	for k, n := range s.eventsPerWorkload(events.QuotaReserved) {
		out[k[strings.Index(k, "/")+1:]] += n
	}
	return out
}

// eventsPerWorkload counts the log's events of one type per workload
// (namespace/name).
func (s *system) eventsPerWorkload(typ events.Type) map[string]int {
	s.t.Helper()
	out := map[string]int{}
	s.scan(func(ev events.Event) {
		if ref, ok := workloadOf(ev); ok && ev.Type == typ {
			out[ref.Namespace+"/"+ref.Name]++
		}
	})
	return out
}

// scan calls f with every event of the log, in order, up to the stream's
// last sequence when it is called: it reads until it has seen that
// sequence (an empty fetch is no proof of the end), and an event that does
// not decode fails the test rather than vanishing from the count.
func (s *system) scan(f func(events.Event)) {
	s.t.Helper()
	s.scanWith(f, func(seq uint64, err error) {
		s.t.Fatalf("event at sequence %d does not decode: %v", seq, err)
	})
}

// scanWith is scan that hands an event that does not decode to
// undecodable, for tests that write such events on purpose.
func (s *system) scanWith(f func(events.Event), undecodable func(seq uint64, err error)) {
	s.t.Helper()
	s.readLog(func(seq uint64, m jetstream.Msg) {
		if ev, err := bus.Decode(m); err != nil {
			undecodable(seq, err)
		} else {
			f(ev)
		}
	})
}

// readLog hands every message of the log, in order, with its sequence.
func (s *system) readLog(f func(seq uint64, m jetstream.Msg)) {
	s.t.Helper()
	last := s.streamState().LastSeq
	if last == 0 {
		return
	}
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		c, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			s.t.Fatal(err)
		}
		for {
			msgs, err := c.Fetch(500, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				s.t.Fatal(err)
			}
			for m := range msgs.Messages() {
				meta, err := m.Metadata()
				if err != nil {
					s.t.Fatal(err)
				}
				f(meta.Sequence.Stream, m)
				if meta.Sequence.Stream >= last {
					return
				}
			}
			// A fetch that ends empty or with a timeout just asks again;
			// the context bounds the whole read.
			if ctx.Err() != nil {
				s.t.Fatalf("the log up to sequence %d not read: %v", last, ctx.Err())
			}
		}
	})
}

// workloadOf is the workload an event is about.
func workloadOf(ev events.Event) (events.WorkloadRef, bool) {
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		return d.WorkloadRef, true
	case *events.QuotaReservedData:
		return d.WorkloadRef, true
	case *events.EvictedData:
		return d.WorkloadRef, true
	case *events.RequeuedData:
		return d.WorkloadRef, true
	case *events.PreemptionRequestedData:
		return d.WorkloadRef, true
	case *events.WorkloadRef:
		return *d, true
	}
	return events.WorkloadRef{}, false
}

// TestAdmissionRestartMidStream kills admission while submissions flow,
// starts a new instance, and checks the end state equals an uninterrupted
// run: the 50 that fit are admitted exactly once, quota is never exceeded.
func TestAdmissionRestartMidStream(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	for i := range 80 {
		if i == 30 {
			s.stopAdmission()
		}
		if i == 50 {
			s.startAdmission("b")
		}
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprintf("w%02d", i)))
	}
	s.sync()
	admitted := 0
	for _, v := range s.workloads() {
		if v.Status == "admitted" {
			admitted++
		}
	}
	if admitted != 50 {
		t.Errorf("%d admitted, want the 50 that fit", admitted)
	}
	// Each decision once: exactly 50 QuotaReserved in the whole log, one
	// per workload.
	decisions := s.decisionsPerWorkload()
	if got := total(decisions); got != 50 || len(decisions) != 50 {
		t.Errorf("%d QuotaReserved events for %d workloads in the log, want 50 for 50", got, len(decisions))
	}
	for name, n := range decisions {
		if n != 1 {
			t.Errorf("%s admitted %d times in the log", name, n)
		}
	}
	var cq struct {
		Usage []struct {
			Used int64 `json:"used"`
		} `json:"usage"`
	}
	s.call("GET", "/v1/clusterqueues/cq", nil, &cq)
	if len(cq.Usage) != 1 || cq.Usage[0].Used != 50_000 {
		t.Errorf("usage %+v, want exactly 50 cpu", cq.Usage)
	}
}
