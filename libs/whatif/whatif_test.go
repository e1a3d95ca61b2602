package whatif

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func objects(t testing.TB, yaml string) []api.Object {
	t.Helper()
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		api.Default(o)
		if err := api.Validate(o); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func queue(name, cohort, cpu string) string {
	return fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  cohort: %[2]q
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: %[3]q}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: %[1]s}
spec: {clusterQueue: %[1]s}
`, name, cohort, cpu)
}

const flavor = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n"

func workload(ns, name string, cpu int, prio int32) *api.Workload {
	return objectsNoT(fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: %s}
spec:
  queueName: lq
  priority: %d
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "%d"}}}]}}
`, name, ns, prio, cpu))
}

func objectsNoT(yaml string) *api.Workload {
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		panic(err)
	}
	api.Default(objs[0])
	return objs[0].(*api.Workload)
}

// arrival is one workload of a recorded run: when it arrives, how long
// it runs once admitted, and an optional priority change.
type arrival struct {
	at      time.Time
	wl      *api.Workload
	run     time.Duration
	bumpAt  time.Time
	bumpTo  int32
	readyIn time.Duration
}

// record runs a workload trace through a Recorder as the services and the
// jobs would: arrivals and priority changes at their times, each
// admission finishing after the workload's run time and reporting
// PodsReady after its delay (a run cut short by preemption reports
// nothing).
func record(t testing.TB, config string, arrivals []arrival, end time.Time) *history.Recorder {
	r := history.NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	r.Settle(t0)
	var q dueQueue
	n := 0
	push := func(at time.Time, do func(time.Time)) {
		n++
		heap.Push(&q, dueItem{at: at, order: n, do: do})
	}
	runs := map[string]time.Duration{}
	ready := map[string]time.Duration{}
	for _, a := range arrivals {
		a := a
		key := a.wl.Namespace + "/" + a.wl.Name
		runs[key], ready[key] = a.run, a.readyIn
		push(a.at, func(at time.Time) {
			if err := r.Submit(a.wl, at); err != nil {
				t.Fatal(err)
			}
		})
		if !a.bumpAt.IsZero() {
			push(a.bumpAt, func(at time.Time) {
				if err := r.SetPriority(key, a.bumpTo, at); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	admittedAt := map[string]time.Time{}
	follow := func() {
		for _, k := range r.Admitted {
			w := r.Eng.Workload(k)
			if w.Status != engine.Admitted || admittedAt[k].Equal(w.AdmittedAt) {
				continue
			}
			admittedAt[k] = w.AdmittedAt
			key, since := k, w.AdmittedAt
			still := func() bool {
				w := r.Eng.Workload(key)
				return w != nil && w.Status == engine.Admitted && w.AdmittedAt.Equal(since)
			}
			if d := ready[key]; d > 0 {
				push(since.Add(d), func(at time.Time) {
					if still() {
						if err := r.PodsReady(key, at); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
			push(since.Add(runs[key]), func(at time.Time) {
				if still() {
					if err := r.Finish(key, at); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	// The podsready service fires each timer at its own instant.
	timerUntil := func(until time.Time) bool {
		if !podsReadyOn(r.Eng) {
			return false
		}
		at, ok := r.Eng.NextTimer()
		if !ok || at.After(until) {
			return false
		}
		r.FireTimers(at)
		r.Settle(at)
		follow()
		return true
	}
	for {
		// A timer due before the next item fires first; what it admits
		// may push items before the one that was next.
		until := end
		if q.Len() > 0 {
			until = q[0].at
		}
		if timerUntil(until) {
			continue
		}
		if q.Len() == 0 {
			break
		}
		it := heap.Pop(&q).(dueItem)
		it.do(it.at)
		r.Settle(it.at)
		follow()
	}
	return r
}

type dueItem struct {
	at    time.Time
	order int
	do    func(time.Time)
}

type dueQueue []dueItem

func (h dueQueue) Len() int { return len(h) }
func (h dueQueue) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}
func (h dueQueue) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueQueue) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueQueue) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// trace is a seeded random workload trace over two queues of a cohort.
func trace(seed uint64, n int, span time.Duration) []arrival {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []arrival
	for i := range n {
		ns := []string{"a", "b"}[rng.IntN(2)]
		at := t0.Add(time.Duration(rng.Int64N(int64(span))).Truncate(time.Second))
		a := arrival{at: at, wl: workload(ns, fmt.Sprint("w", i), 1+rng.IntN(3), int32(rng.IntN(3))*10),
			run: time.Duration(1+rng.IntN(30)) * time.Minute, readyIn: time.Duration(rng.IntN(60)) * time.Second}
		if rng.IntN(10) == 0 {
			a.bumpAt, a.bumpTo = at.Add(time.Duration(1+rng.IntN(20))*time.Minute), 100
		}
		out = append(out, a)
	}
	return out
}

// TestUnchangedConfigurationReproducesHistory: a what-if with the
// configuration as recorded admits every workload when it was admitted,
// and every statistic equals the recorded one.
func TestUnchangedConfigurationReproducesHistory(t *testing.T) {
	config := flavor + queue("a", "c", "6") + queue("b", "c", "4")
	r := record(t, config, trace(7, 200, 4*time.Hour), t0.Add(6*time.Hour))
	rep := unchanged(t, r.Log, t0.Add(6*time.Hour))
	preempted, waited := 0, 0
	for _, q := range rep.Queues {
		preempted += q.Old.Preemptions
		if q.Old.MeanWaitSeconds > 0 {
			waited++
		}
	}
	if rep.Arrivals != 200 || preempted == 0 || waited != 2 {
		t.Fatalf("the trace proves little: %d arrivals, %d preemptions, %d queues with waits", rep.Arrivals, preempted, waited)
	}
	t.Logf("%d steps; %+v", rep.Steps, rep.Queues)
}

// TestChangedQuota: one queue of 1 cpu, three 1-cpu workloads arriving
// together, each running 10 minutes. Recorded: admitted at 0, 10 and 20
// minutes (waits 0, 600, 1200 s: mean 600, p95 1200), 1 cpu busy for 30 of
// 60 minutes (50%). With 3 cpu: all at 0, 3 cpu busy 10 of 60 minutes
// (16.667%).
func TestChangedQuota(t *testing.T) {
	var arrivals []arrival
	for i := range 3 {
		arrivals = append(arrivals, arrival{at: t0.Add(time.Second), wl: workload("a", fmt.Sprint("w", i), 1, 0), run: 10 * time.Minute})
	}
	r := record(t, flavor+queue("a", "", "1"), arrivals, t0.Add(time.Hour))
	rep, err := Run(r.Log, Options{From: t0, To: t0.Add(time.Hour), Config: objects(t, queue("a", "", "3"))[:1]})
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueReport{{ClusterQueue: "a",
		Old: Stats{Admitted: 3, Waited: 3, MeanWaitSeconds: 600, P95WaitSeconds: 1200,
			Usage: []CellUsage{{Flavor: "rf", Resource: "cpu", Percent: 50}}},
		New: Stats{Admitted: 3, Waited: 3, MeanWaitSeconds: 0, P95WaitSeconds: 0,
			Usage: []CellUsage{{Flavor: "rf", Resource: "cpu", Percent: 16.667}}},
	}}
	if d := cmp.Diff(want, rep.Queues); d != "" {
		t.Errorf("queues (-want,+got):\n%s", d)
	}
	var movedNames []string
	var deltas []float64
	for _, m := range rep.Moved {
		movedNames = append(movedNames, m.Name)
		deltas = append(deltas, *m.DeltaSeconds)
	}
	if d := cmp.Diff([]string{"w2", "w1"}, movedNames); d != "" {
		t.Errorf("moved (-want,+got):\n%s", d)
	}
	if d := cmp.Diff([]float64{-1200, -600}, deltas); d != "" {
		t.Errorf("deltas (-want,+got):\n%s", d)
	}
}

func TestWindowBounds(t *testing.T) {
	r := record(t, flavor+queue("a", "", "1"), nil, t0)
	if _, err := Run(r.Log, Options{From: t0, To: t0}); err == nil {
		t.Error("an empty window was accepted")
	}
	if _, err := Run(r.Log, Options{From: t0, To: t0.Add(MaxWindow + time.Second)}); err == nil {
		t.Error("a window over the limit was accepted")
	}
	// Before the first event there was nothing: a window may start there.
	if _, err := Run(r.Log, Options{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); err != nil {
		t.Errorf("a window starting before the history: %v", err)
	}
	// A log that lost its beginning cannot be replayed.
	if _, err := Run(r.Log[1:], Options{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); !errors.Is(err, history.ErrBeforeHistory) {
		t.Errorf("a log without its beginning: %v", err)
	}
}

// TestUnchangedConfigurationReproducesPodsReadyTimeouts: with
// waitForPodsReady on (5 minutes, two requeues with a 1-minute base
// backoff), workloads whose pods take 0 to 7 minutes to be ready time
// out, wait out their backoff and are deactivated as recorded; the replay
// with the configuration unchanged fires the same timers.
func TestUnchangedConfigurationReproducesPodsReadyTimeouts(t *testing.T) {
	const podsReady = `---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  timeout: 5m
  blockAdmission: false
  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: 2, backoffBaseSeconds: 60}
`
	arrivals := trace(3, 120, 3*time.Hour)
	for i := range arrivals {
		arrivals[i].readyIn = time.Duration(i%8) * time.Minute
	}
	end := t0.Add(5 * time.Hour)
	r := record(t, flavor+queue("a", "c", "6")+queue("b", "c", "4")+podsReady, arrivals, end)
	timeouts := 0
	for _, rec := range r.Log {
		if d, ok := rec.Event.Data.(*events.EvictedData); ok && d.Reason == engine.EvictedByPodsReadyTimeout {
			timeouts++
		}
	}
	if timeouts == 0 {
		t.Fatal("no PodsReady timeout recorded: the test proves little")
	}
	rep := unchanged(t, r.Log, end)
	again, err := Run(r.Log, Options{From: t0, To: end})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rep, again); d != "" {
		t.Errorf("two runs differ (-first,+second):\n%s", d)
	}
	t.Logf("%d timeouts recorded, %d steps", timeouts, rep.Steps)
}

// expiredLog: one queue of 2 cpu. a/w1 (2 cpu) runs 0–10m, finishes and
// expires at 20m, which frees its name; a/x (2 cpu) runs 25m–55m; a new
// a/w1 (1 cpu) arrives at 30m, waits for x, runs 55m–75m.
func expiredLog(t *testing.T) *history.Recorder {
	r := history.NewRecorder()
	for _, o := range objects(t, flavor+queue("a", "", "2")) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	steps := []struct {
		at int
		do func(time.Time) error
	}{
		{0, func(at time.Time) error { return r.Submit(workload("a", "w1", 2, 0), at) }},
		{10, func(at time.Time) error { return r.Finish("a/w1", at) }},
		{20, func(at time.Time) error { return r.Expire("a/w1", at) }},
		{25, func(at time.Time) error { return r.Submit(workload("a", "x", 2, 0), at) }},
		{30, func(at time.Time) error { return r.Submit(workload("a", "w1", 1, 0), at) }},
		{55, func(at time.Time) error { return r.Finish("a/x", at) }},
		{75, func(at time.Time) error { return r.Finish("a/w1", at) }},
	}
	for _, s := range steps {
		if err := s.do(m(s.at)); err != nil {
			t.Fatal(err)
		}
		r.Settle(m(s.at))
	}
	if w := r.Eng.Workload("a/w1"); w == nil || w.Status != engine.Finished || !w.AdmittedAt.IsZero() && !w.AdmittedAt.Equal(m(55)) {
		t.Fatalf("the recorded run went otherwise: %+v", w)
	}
	return r
}

// TestExpiredNameReusedReproducesHistory: with the configuration
// unchanged, a history where a workload expires and its name is used
// again is reproduced exactly, and each of the two workloads named a/w1
// counts on its own: waits 0 (w1), 0 (x) and 25m (the second w1), mean
// 500 s, p95 1500 s; usage 2 cpu × 10m + 2 cpu × 30m + 1 cpu × 20m over
// 2 cpu × 2h = 41.667%.
func TestExpiredNameReusedReproducesHistory(t *testing.T) {
	r := expiredLog(t)
	from := t0.Add(-time.Minute) // before the history: every event is in the window
	rep, err := Run(r.Log, Options{From: from, To: from.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Admitted: 3, Waited: 3, MeanWaitSeconds: 500, P95WaitSeconds: 1500,
		Usage: []CellUsage{{Flavor: "rf", Resource: "cpu", Percent: 41.667}}}
	if len(rep.Queues) != 1 || rep.Arrivals != 3 || len(rep.Moved) != 0 {
		t.Fatalf("%d arrivals, queues %+v, moved %+v; want 3 arrivals in a, nothing moved", rep.Arrivals, rep.Queues, rep.Moved)
	}
	if d := cmp.Diff(want, rep.Queues[0].Old); d != "" {
		t.Errorf("recorded (-want,+got):\n%s", d)
	}
	if d := cmp.Diff(want, rep.Queues[0].New); d != "" {
		t.Errorf("replayed (-want,+got):\n%s", d)
	}
}

// TestExpiryOfAWorkloadStillRunningInTheReplay: with 1 cpu, neither 2-cpu
// workload is ever admitted in the replay; the first a/w1, still pending
// at its recorded expiry, gives way when its name is submitted again, and
// the second a/w1 (1 cpu) is admitted on arrival at 30m and runs its own
// recorded 20m: 1 cpu × 20m over 1 cpu × 2h = 16.667%.
func TestExpiryOfAWorkloadStillRunningInTheReplay(t *testing.T) {
	r := expiredLog(t)
	from := t0.Add(-time.Minute)
	rep, err := Run(r.Log, Options{From: from, To: from.Add(2 * time.Hour), Config: objects(t, queue("a", "", "1"))[:1]})
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Admitted: 1, Waited: 1, Unadmitted: 2, Usage: []CellUsage{{Flavor: "rf", Resource: "cpu", Percent: 16.667}}}
	if len(rep.Queues) != 1 || rep.Arrivals != 3 {
		t.Fatalf("%d arrivals, queues %+v; want 3 arrivals in a", rep.Arrivals, rep.Queues)
	}
	if d := cmp.Diff(want, rep.Queues[0].New); d != "" {
		t.Errorf("replayed (-want,+got):\n%s", d)
	}
	t30, t55 := t0.Add(30*time.Minute), t0.Add(55*time.Minute)
	var second *Moved
	for i, m := range rep.Moved {
		if m.Name == "w1" && m.Old != nil && m.Old.Equal(t55) {
			second = &rep.Moved[i]
		}
	}
	if second == nil || second.New == nil || !second.New.Equal(t30) || len(rep.Moved) != 3 {
		t.Fatalf("moved %+v, want the second a/w1 from 55m to 30m, and the first a/w1 and a/x never admitted", rep.Moved)
	}
}
