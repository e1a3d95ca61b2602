package eta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/counterfactual"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
)

// randomWorld: a cohort of two ClusterQueues that preempt lower priorities
// within themselves and reclaim from the cohort, fed by three LocalQueues.
const randomWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohort: all
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 6}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohort: all
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: a, namespace: ns}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: a2, namespace: ns}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: b, namespace: ns}
spec: {clusterQueue: cq-b}
`

// randomLog records n steps: arrivals with random priorities, sizes and
// (for some) expected-runtime annotations, finishes of admitted
// workloads, priority changes; the engine decides after each, as the
// services would.
func randomLog(t *testing.T, n int, seed uint64) *history.Recorder {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	rec := history.NewRecorder()
	for _, o := range decode(t, randomWorld) {
		if err := rec.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	at := t0
	next := 0
	for range n {
		at = at.Add(time.Duration(1+rng.IntN(600)) * time.Second)
		var admitted, live []string
		for k, w := range rec.Eng.Workloads() {
			switch w.Status {
			case "admitted":
				admitted = append(admitted, k)
				live = append(live, k)
			case "pending":
				live = append(live, k)
			}
		}
		slices.Sort(admitted)
		slices.Sort(live)
		switch r := rng.IntN(10); {
		case r < 5 || len(live) == 0:
			ann := ""
			if rng.IntN(3) == 0 {
				ann = fmt.Sprintf("\n  annotations: {%s: %q}", api.ExpectedRuntimeAnnot, fmt.Sprintf("%dm", 1+rng.IntN(60)))
			}
			doc := fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: w%d
  namespace: ns%s
spec:
  queueName: %s
  priority: %d
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "%d"}}
`, next, ann, []string{"a", "a2", "b"}[rng.IntN(3)], rng.IntN(3)*10, 1+rng.IntN(4))
			next++
			if err := rec.Submit(decode(t, doc)[0].(*api.Workload), at); err != nil {
				t.Fatal(err)
			}
		case r < 8 && len(admitted) > 0:
			if err := rec.Finish(admitted[rng.IntN(len(admitted))], at); err != nil {
				t.Fatal(err)
			}
		default:
			if err := rec.SetPriority(live[rng.IntN(len(live))], int32(rng.IntN(4)*10), at); err != nil {
				t.Fatal(err)
			}
		}
		rec.Settle(at)
	}
	return rec
}

// TestReplicaEqualsFullReplay: on random logs, the estimates of a replica
// that applied the log in two parts, estimating in between (a state kept
// up to date, then the tail), equal those of the whole log folded at once,
// the answer every estimate used to replay the log for.
func TestReplicaEqualsFullReplay(t *testing.T) {
	estimated, admittedLater := 0, 0
	for seed := range uint64(12) {
		rec := randomLog(t, 150, seed)
		log := rec.Log
		now := log[len(log)-1].Event.Time.Add(time.Minute)
		st, err := history.Fold(log, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		want := Estimates(st.Engine, Recorded(log, time.Time{}), now)

		split := 1 + rand.New(rand.NewPCG(seed, 3)).IntN(len(log)-1)
		r := NewReplica()
		for _, x := range log[:split] {
			r.Apply(x)
		}
		if _, err := r.Estimates(log[split-1].Event.Time); err != nil {
			t.Fatal(err)
		}
		for _, x := range log[split:] {
			r.Apply(x)
		}
		got, err := r.Estimates(now)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.Estimates, got.Estimates); d != "" {
			t.Fatalf("seed %d, split at %d of %d: estimates differ (-full replay,+replica):\n%s", seed, split, len(log), d)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("seed %d: results differ (-full replay,+replica):\n%s", seed, d)
		}
		// A second estimate at the same point answers the same: the
		// first did not consume the replica.
		again, err := r.Estimates(now)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.Estimates, again.Estimates); d != "" {
			t.Fatalf("seed %d: a second estimate differs (-first,+second):\n%s", seed, d)
		}
		for _, e := range want.Estimates {
			estimated++
			if e.At != nil && *e.At != now {
				admittedLater++
			}
		}
	}
	// The logs must exercise the simulation: pending workloads, some
	// admitted only after finishes.
	if estimated < 100 || admittedLater < 30 {
		t.Fatalf("%d estimates, %d admitted after now: the random logs are too easy", estimated, admittedLater)
	}
	t.Logf("%d estimates, %d admitted after now", estimated, admittedLater)
}

// TestLearnerIsBounded: over a long history of one class, the learner
// keeps fewer than 2×MaxSamples run times and takes the median of the
// most recent MaxSamples; it forgets every workload once it has finished.
func TestLearnerIsBounded(t *testing.T) {
	rec := history.NewRecorder()
	for _, o := range decode(t, config) {
		if err := rec.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	l := NewLearner()
	for _, r := range rec.Log {
		l.Observe(r.Event)
	}
	const n = 5 * MaxSamples
	at := t0
	for i := 1; i <= n; i++ {
		from := len(rec.Log)
		if err := rec.Submit(decode(t, wl(fmt.Sprintf("w%d", i), 1, ""))[0].(*api.Workload), at); err != nil {
			t.Fatal(err)
		}
		rec.Settle(at)
		// Run i takes i seconds.
		at = at.Add(time.Duration(i) * time.Second)
		if err := rec.Finish(fmt.Sprintf("ns/w%d", i), at); err != nil {
			t.Fatal(err)
		}
		for _, r := range rec.Log[from:] {
			l.Observe(r.Event)
		}
	}
	c := Class{LocalQueue: "ns/lq"}
	if k := len(l.Runs()[c]); k >= 2*MaxSamples || k < MaxSamples {
		t.Fatalf("holds %d run times of %d, want from %d to %d", k, n, MaxSamples, 2*MaxSamples-1)
	}
	// The most recent MaxSamples run n-MaxSamples+1 … n seconds; their
	// lower median is the (MaxSamples-1)/2-th.
	want := time.Duration(n-MaxSamples+1+(MaxSamples-1)/2) * time.Second
	if d, ok := l.Runs().Median(c); !ok || d != want {
		t.Fatalf("median %s, want %s", d, want)
	}
	if rt := Expected(decode(t, wl("x", 1, ""))[0].(*api.Workload), l.Runs()); rt.Samples != MaxSamples || rt.Seconds != want.Seconds() {
		t.Fatalf("expected run time %+v, want %s over %d samples", rt, want, MaxSamples)
	}
	if len(l.class) != 0 || len(l.admitted) != 0 {
		t.Fatalf("remembers %d classes and %d admissions of finished workloads, want none", len(l.class), len(l.admitted))
	}
}

// TestReplicaBuilderSearchesAsTheLog: counterfactuals searched on copies
// of the replica's state equal those searched, as before, on folds of the
// whole log compacted to what the live workloads depend on, for every
// pending workload of random logs; and a search leaves the replica as it
// was.
func TestReplicaBuilderSearchesAsTheLog(t *testing.T) {
	searched, withChanges := 0, 0
	for seed := range uint64(6) {
		log, now, r := replicaOf(t, 120, seed)
		before, err := r.State().Engine.EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		live, err := history.Compact(log, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var pending []string
		for k, w := range r.State().Engine.Workloads() {
			if w.Status == engine.Pending {
				pending = append(pending, k)
			}
		}
		slices.Sort(pending)
		for _, k := range pending[:min(len(pending), 4)] {
			want, err := counterfactual.Search(history.Builder(live, time.Time{}), k, now)
			if err != nil {
				t.Fatal(err)
			}
			build, err := r.Builder()
			if err != nil {
				t.Fatal(err)
			}
			got, err := counterfactual.Search(build, k, now)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("seed %d, %s: counterfactuals differ (-compacted log,+replica):\n%s", seed, k, d)
			}
			searched++
			if len(got.Changes) > 0 {
				withChanges++
			}
		}
		after, err := r.State().Engine.EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, after) {
			t.Fatalf("seed %d: searching changed the replica's state", seed)
		}
	}
	if searched < 10 || withChanges < 5 {
		t.Fatalf("searched %d pending workloads, %d with changes: the logs test too little", searched, withChanges)
	}
	t.Logf("%d searches, %d with changes", searched, withChanges)
}

// TestUntilGivesTheWholeRunsEstimates: a simulation run only until some
// workloads are admitted gives each of them the estimate the whole
// simulation gives, having simulated fewer finishes; running it on
// (another page, then to the end) changes none of the estimates given.
func TestUntilGivesTheWholeRunsEstimates(t *testing.T) {
	shorter := 0
	for seed := range uint64(10) {
		_, now, r := replicaOf(t, 150, seed)
		whole, err := r.Estimates(now)
		if err != nil {
			t.Fatal(err)
		}
		x, err := r.Start(now)
		if err != nil {
			t.Fatal(err)
		}
		keys := sortedKeys(whole.Estimates)
		rng := rand.New(rand.NewPCG(seed, 5))
		pages := [][]string{}
		for range 3 {
			var page []string
			for _, k := range keys {
				if rng.IntN(4) == 0 {
					page = append(page, k)
				}
			}
			pages = append(pages, page)
		}
		given := map[string]Estimate{}
		for i, page := range pages {
			res := x.Until(page)
			if i == 0 && !x.Ended() && res.Steps < whole.Steps {
				shorter++
			}
			for _, k := range page {
				got, want := res.Estimates[k], whole.Estimates[k]
				if got.At == nil && !x.Ended() {
					t.Fatalf("seed %d: %s has no estimate and the simulation has not ended", seed, k)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("seed %d, page %d: %s (-whole run,+until):\n%s", seed, i, k, d)
				}
				given[k] = *got
			}
		}
		res := x.Until(nil)
		if d := cmp.Diff(whole, res); d != "" {
			t.Fatalf("seed %d: run to the end (-whole run,+until):\n%s", seed, d)
		}
		for k, e := range given {
			if d := cmp.Diff(e, *res.Estimates[k]); d != "" {
				t.Fatalf("seed %d: %s changed after it was given:\n%s", seed, k, d)
			}
		}
	}
	if shorter < 3 {
		t.Fatalf("the first page stopped early in %d of 10 logs: the test shows nothing", shorter)
	}
}

// replicaOf is a replica of a random log of n steps, and a minute after
// the log's last event.
func replicaOf(t *testing.T, n int, seed uint64) ([]history.Record, time.Time, *Replica) {
	t.Helper()
	log := randomLog(t, n, seed).Log
	r := NewReplica()
	for _, x := range log {
		r.Apply(x)
	}
	return log, log[len(log)-1].Event.Time.Add(time.Minute), r
}

// TestReplicaCopiesKeepTheirMoment: the copies a builder makes, and a
// simulation started, are of the state at the moment they were asked
// for, while the replica goes on applying events on another goroutine
// (as the ingest service's searches run beside its catch-up): copies
// made meanwhile encode as the state did, and the simulation estimates
// as one started on a replica that stopped there. Under the race
// detector it also proves that they share nothing the replica writes.
func TestReplicaCopiesKeepTheirMoment(t *testing.T) {
	for seed := range uint64(4) {
		log := randomLog(t, 150, seed).Log
		split := len(log) / 2
		at := log[split-1].Event.Time.Add(time.Minute)
		r, stopped := NewReplica(), NewReplica()
		for _, x := range log[:split] {
			r.Apply(x)
			stopped.Apply(x)
		}
		want, err := r.State().Engine.EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		wantETA, err := stopped.Estimates(at)
		if err != nil {
			t.Fatal(err)
		}
		build, err := r.Builder()
		if err != nil {
			t.Fatal(err)
		}
		sim, err := r.Start(at)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, x := range log[split:] {
				r.Apply(x)
			}
		}()
		for range 3 {
			st, err := build()
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.Engine.EncodeSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("seed %d: a copy differs from the state it was asked for", seed)
			}
			st.Engine.RunToQuiescence(at)
		}
		if d := cmp.Diff(wantETA, sim.Until(nil)); d != "" {
			t.Fatalf("seed %d: the simulation started at the split differs (-replica stopped there,+started there):\n%s", seed, d)
		}
		<-done
	}
}
