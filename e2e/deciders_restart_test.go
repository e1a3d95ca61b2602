package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/sim"
)

// preemptionScenario fills a queue of 8 cpu with 8 low-priority workloads,
// then submits 8 high-priority ones that each need one of them preempted.
func preemptionScenario(t *testing.T) *sim.Scenario {
	t.Helper()
	wl := func(name string, prio int) string {
		return fmt.Sprintf(`
  - apiVersion: kueue.x-k8s.io/v1beta1
    kind: Workload
    metadata: {name: %s, namespace: ns}
    spec:
      queueName: lq
      priority: %d
      podSets:
      - name: main
        count: 1
        template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}`, name, prio)
	}
	var low, high strings.Builder
	for i := range 8 {
		low.WriteString(wl(fmt.Sprintf("low-%d", i), 0))
		high.WriteString(wl(fmt.Sprintf("high-%d", i), 10))
	}
	sc, err := sim.Parse([]byte(`
name: preemptor-restart
objects:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ResourceFlavor
  metadata: {name: rf}
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    preemption: {withinClusterQueue: LowerPriority}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - name: rf
        resources: [{name: cpu, nominalQuota: "8"}]
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: LocalQueue
  metadata: {name: lq, namespace: ns}
  spec: {clusterQueue: cq}
steps:
- submit:` + low.String() + `
- submit:` + high.String() + `
`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// preemptionRequested plays the preemption scenario with the preemptor
// stopped, until admission has requested the first preemption; it returns
// the system, the scenario and the simulator's run of it.
func preemptionRequested(t *testing.T) (*system, *sim.Scenario, *sim.Result) {
	t.Helper()
	sc := preemptionScenario(t)
	want, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t)
	send := func(path string, want int, objs []api.Object) {
		var docs [][]byte
		for _, o := range objs {
			docs = append(docs, marshal(t, o))
		}
		s.must(want, "POST", path, list(docs...))
	}
	send("/v1/apply", http.StatusOK, sc.Objects)
	send("/v1/workloads", http.StatusAccepted, sc.Steps[0].Submit)
	s.sync()
	s.stopPreemptor()
	send("/v1/workloads", http.StatusAccepted, sc.Steps[1].Submit)
	s.waitFor("a preemption request", func() bool { return len(s.eventsPerWorkload(events.PreemptionRequested)) > 0 })
	return s, sc, want
}

// TestPreemptorRestartMidWork stops the preemptor while preemptions are
// requested, starts another that is stopped after a few evictions, then a
// third: every victim is evicted exactly once, and the end state equals
// the simulator's uninterrupted run.
func TestPreemptorRestartMidWork(t *testing.T) {
	s, sc, want := preemptionRequested(t)
	stopB := s.startPreemptor("b")
	s.waitFor("three evictions", func() bool { return total(s.eventsPerWorkload(events.Evicted)) >= 3 })
	stopB()
	s.startPreemptor("c")
	s.sync()

	for i := range 8 {
		if n := s.eventsPerWorkload(events.Evicted)[fmt.Sprintf("ns/low-%d", i)]; n != 1 {
			t.Errorf("low-%d evicted %d times, want once", i, n)
		}
	}
	if peak := s.peakAdmitted(); peak > 8 {
		t.Errorf("the log shows %d workloads holding quota at once; 8 fit: an admission was published before its victim's eviction", peak)
	}
	for _, v := range s.workloads() {
		if v.Status == "pending" && v.Reason != "WaitingForQuota" {
			t.Errorf("%s is pending with reason %q, want WaitingForQuota (tried again after its eviction)", v.Name, v.Reason)
		}
	}
	s.sameEndAs(sc, want)
}

// TestPodsReadyRestartKeepsEveryTimer restarts the podsready service
// before and after every `advance` of the waitForPodsReady scenarios (the
// replacement re-arms its timers from the log): every expectation still
// holds, and each workload lost its quota as often as in the simulator,
// so no timeout was lost or fired twice.
func TestPodsReadyRestartKeepsEveryTimer(t *testing.T) {
	for _, name := range []string{"403-backoff-doubles-on-each-timeout", "405-backoff-limit-count-deactivates-after-limit",
		"418-evicted-quota-usable-by-others-during-backoff", "426-timers-fire-in-time-order-within-one-advance",
		"428-requeue-count-survives-preemption"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile("../conformance/podsready/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			sc, err := sim.Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := sim.Run(sc)
			if err != nil {
				t.Fatal(err)
			}
			s := startWith(t, true)
			stop, n := s.stopPodsReady, 0
			restart := func() {
				stop()
				n++
				stop = s.startPodsReady(fmt.Sprintf("r%d", n))
			}
			playWith(t, s, sc, func(i int) {
				if sc.Steps[i].Advance != nil {
					restart()
				} else if i+1 < len(sc.Steps) && sc.Steps[i+1].Advance != nil {
					restart()
				}
			})
			got := map[string]int{}
			for _, v := range s.workloads() {
				if v.Evictions > 0 {
					got[v.Namespace+"/"+v.Name] = v.Evictions
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want.Evictions) {
				t.Errorf("evictions per workload %v, the simulator's %v", got, want.Evictions)
			}
		})
	}
}

// sameEndAs checks the final admitted and pending workloads against the
// simulator's run.
func (s *system) sameEndAs(sc *sim.Scenario, want *sim.Result) {
	s.t.Helper()
	final := want.Checkpoints[len(want.Checkpoints)-1]
	got := checkpoint(len(sc.Steps), s.workloads())
	if !slices.Equal(keys(got.Admitted), keys(final.Admitted)) || !slices.Equal(got.Pending, final.Pending) {
		s.t.Errorf("admitted %v pending %v; the simulator has admitted %v pending %v",
			keys(got.Admitted), got.Pending, keys(final.Admitted), final.Pending)
	}
}

// peakAdmitted replays the log in order and returns the largest number of
// workloads holding quota at any point.
func (s *system) peakAdmitted() int {
	s.t.Helper()
	holding, peak := map[string]bool{}, 0
	s.scan(func(ev events.Event) {
		ref, ok := workloadOf(ev)
		if !ok {
			return
		}
		switch ev.Type {
		case events.QuotaReserved:
			holding[ref.Name] = true
		case events.Evicted, events.WorkloadFinished, events.WorkloadDeleted:
			delete(holding, ref.Name)
		}
		peak = max(peak, len(holding))
	})
	return peak
}

// waitFor polls cond until it holds (a service works asynchronously).
func (s *system) waitFor(what string, cond func() bool) {
	s.t.Helper()
	poll(s.t, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// TestVictimChangedBeforeEvictionIsDecidedAgain: a victim whose pods
// become ready after admission chose it (the preemptor is down) is not
// evicted on those stale grounds: the preemptor's fence refuses, admission
// replays the log and decides again on the new state, and the end state
// equals the simulator's. The same holds when a new admission leader had
// adopted the request before the victim changed.
func TestVictimChangedBeforeEvictionIsDecidedAgain(t *testing.T) {
	for _, newLeader := range []bool{false, true} {
		t.Run(fmt.Sprintf("new leader %v", newLeader), func(t *testing.T) {
			t.Parallel()
			s, sc, want := preemptionRequested(t)
			if newLeader {
				s.stopAdmission()
				s.startAdmission("b")
				s.waitFor("admission b to lead", func() bool { return s.leaseHolder("admission-0") == "b" })
			}
			var victim string
			s.scan(func(ev events.Event) {
				if d, ok := ev.Data.(*events.PreemptionRequestedData); ok && victim == "" {
					victim = d.Victims[0].Namespace + "/" + d.Victims[0].Name
				}
			})
			s.must(http.StatusAccepted, "POST", "/v1/workloads/"+victim+"/podsready", nil)
			s.startPreemptor("b")
			s.sync()

			if n := s.eventsPerWorkload(events.Evicted)[victim]; n != 1 {
				t.Errorf("%s evicted %d times, want once (on the grounds decided after its change)", victim, n)
			}
			// Eight preemptions, and the refused one asked again.
			if n := total(s.eventsPerWorkload(events.PreemptionRequested)); n != 9 {
				t.Errorf("%d preemption requests, want 9: the refused one decided again", n)
			}
			if peak := s.peakAdmitted(); peak > 8 {
				t.Errorf("the log shows %d workloads holding quota at once; 8 fit", peak)
			}
			s.sameEndAs(sc, want)
		})
	}
}

// TestNewLeaderAdoptsAPreemptionInFlight: admission is replaced after it
// requested a preemption and before the preemptor evicted anyone. The new
// leader adopts the request (its engine evicts the victims, and its
// decisions wait for their evictions) instead of deciding the preemption
// again, which could choose other victims: one request per preemption,
// every victim evicted once, and the simulator's end state.
func TestNewLeaderAdoptsAPreemptionInFlight(t *testing.T) {
	s, sc, want := preemptionRequested(t)
	s.stopAdmission()
	s.startAdmission("b")
	s.waitFor("admission b to lead", func() bool { return s.leaseHolder("admission-0") == "b" })
	// Once b has read something published after it led, it has decided
	// at least once as the leader.
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"probe"}}`))
	end := s.streamState().LastSeq
	s.waitFor("admission b to read the log", func() bool { return s.marks()["admission"].Seq >= end })
	if n := total(s.eventsPerWorkload(events.PreemptionRequested)); n != 1 {
		t.Fatalf("%d preemption requests before any eviction, want 1: the new leader decided the preemption again", n)
	}
	s.startPreemptor("b")
	s.sync()

	if n := total(s.eventsPerWorkload(events.PreemptionRequested)); n != 8 {
		t.Errorf("%d preemption requests, want 8", n)
	}
	for i := range 8 {
		if n := s.eventsPerWorkload(events.Evicted)[fmt.Sprintf("ns/low-%d", i)]; n != 1 {
			t.Errorf("low-%d evicted %d times, want once", i, n)
		}
	}
	if peak := s.peakAdmitted(); peak > 8 {
		t.Errorf("the log shows %d workloads holding quota at once; 8 fit", peak)
	}
	s.sameEndAs(sc, want)
}

// leaseHolder is the instance holding a shard's lease ("" if none).
func (s *system) leaseHolder(shard string) string {
	s.t.Helper()
	var holder string
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		kv, err := js.KeyValue(ctx, bus.LeaseBucket)
		if err != nil {
			s.t.Fatal(err)
		}
		if e, err := kv.Get(ctx, shard); err == nil {
			holder = string(e.Value())
		}
	})
	return holder
}

// marks are the services' progress marks.
func (s *system) marks() map[string]bus.Mark {
	s.t.Helper()
	var m map[string]bus.Mark
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		var err error
		if m, err = bus.ReadMarks(ctx, js); err != nil {
			s.t.Fatal(err)
		}
	})
	return m
}

// streamState is JQ_EVENTS's state now.
func (s *system) streamState() jetstream.StreamState {
	s.t.Helper()
	var state jetstream.StreamState
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		st, err := js.Stream(ctx, events.Stream)
		if err != nil {
			s.t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		state = info.State
	})
	return state
}

// withJS runs f on a connection of its own, closed afterwards.
func (s *system) withJS(f func(context.Context, jetstream.JetStream)) {
	s.t.Helper()
	nc, err := bus.Connect(s.nats, "probe")
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f(ctx, js)
}
