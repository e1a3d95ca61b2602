package eta

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const config = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
`

func decode(t testing.TB, yaml string) []api.Object {
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

// wl is a workload of lq asking cpu, with an expected-runtime annotation
// when runtime is not empty.
func wl(name string, cpu int, runtime string) string {
	ann := ""
	if runtime != "" {
		ann = fmt.Sprintf("\n  annotations: {%s: %q}", api.ExpectedRuntimeAnnot, runtime)
	}
	return fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: %s
  namespace: ns%s
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "%d"}}
`, name, ann, cpu)
}

type world struct {
	t   *testing.T
	rec *history.Recorder
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, rec: history.NewRecorder()}
	for _, o := range decode(t, config) {
		if err := w.rec.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *world) submit(at time.Time, yaml string) {
	w.t.Helper()
	for _, o := range decode(w.t, yaml) {
		if err := w.rec.Submit(o.(*api.Workload), at); err != nil {
			w.t.Fatal(err)
		}
		w.rec.Settle(at)
	}
}

func (w *world) finish(at time.Time, key string) {
	w.t.Helper()
	if err := w.rec.Finish(key, at); err != nil {
		w.t.Fatal(err)
	}
	w.rec.Settle(at)
}

func (w *world) estimate(now time.Time) *Result {
	w.t.Helper()
	st, err := history.Fold(w.rec.Log, time.Time{})
	if err != nil {
		w.t.Fatal(err)
	}
	return Estimates(st.Engine, Recorded(w.rec.Log, time.Time{}), now)
}

func at(t *testing.T, r *Result, key string) *time.Time {
	t.Helper()
	e := r.Estimates[key]
	if e == nil {
		t.Fatalf("no estimate for %s", key)
	}
	return e.At
}

// The expectations below are worked out by hand from the quota (4 cpu)
// and the run times.
func TestChainOfFinishes(t *testing.T) {
	w := newWorld(t)
	// Two recorded runs of the class (ns/lq, no priority class): 20m and
	// 40m; their lower median is 20m.
	w.submit(t0, wl("old1", 4, ""))
	w.finish(t0.Add(20*time.Minute), "ns/old1")
	w.submit(t0.Add(20*time.Minute), wl("old2", 4, ""))
	w.finish(t0.Add(60*time.Minute), "ns/old2")
	start := t0.Add(time.Hour)
	w.submit(start, wl("a", 4, "1h"))                     // admitted at start, ends start+1h
	w.submit(start.Add(time.Second), wl("b", 2, ""))      // class median 20m
	w.submit(start.Add(2*time.Second), wl("c", 2, "2h"))  // annotation 2h
	w.submit(start.Add(3*time.Second), wl("d", 4, "30m")) // needs the whole queue
	now := start.Add(10 * time.Minute)
	r := w.estimate(now)
	// a ends at start+1h: b and c (2+2) fit then. b ends at start+1h20m,
	// leaving 2 cpu; d fits only once c ends, at start+3h.
	want := map[string]time.Time{
		"ns/b": start.Add(time.Hour),
		"ns/c": start.Add(time.Hour),
		"ns/d": start.Add(3 * time.Hour),
	}
	for k, v := range want {
		got := at(t, r, k)
		if got == nil || !got.Equal(v) {
			t.Errorf("%s: ETA %v, want %v (%s)", k, got, v, r.Estimates[k].Assumption)
		}
	}
	// The finishes of a, b and c decide every ETA; d's own finish, after
	// the last pending workload is admitted, is not simulated.
	if r.Steps != 3 {
		t.Errorf("simulated %d finishes, want 3 (a, b, c)", r.Steps)
	}
	if got := *r.Estimates["ns/b"].WaitSeconds; got != 50*60 {
		t.Errorf("b waits %vs, want 3000", got)
	}
	if rt := r.Estimates["ns/b"].Runtime; rt.Basis != FromRecorded || rt.Seconds != 20*60 || rt.Samples != 2 {
		t.Errorf("b's runtime %+v, want the median of 2 recorded runs, 1200s", rt)
	}
	d := r.Estimates["ns/d"]
	if len(d.After) != 1 || d.After[0].Name != "c" || d.After[0].Runtime.Basis != FromAnnotation {
		t.Errorf("d waits on %+v, want c's finish, from its annotation", d.After)
	}
	if !strings.Contains(d.Assumption, "ns/c (run time 2h0m0s, from its jetqueue.dev/expected-runtime annotation)") {
		t.Errorf("d's assumption: %s", d.Assumption)
	}
}

func TestOverdueRunFinishesNow(t *testing.T) {
	w := newWorld(t)
	w.submit(t0, wl("a", 4, "5m"))
	w.submit(t0.Add(time.Second), wl("b", 4, ""))
	now := t0.Add(10 * time.Minute)
	r := w.estimate(now)
	if got := at(t, r, "ns/b"); got == nil || !got.Equal(now) {
		t.Fatalf("b: ETA %v, want now %v", got, now)
	}
	if f := r.Estimates["ns/b"].After; len(f) != 1 || !f[0].Overdue {
		t.Errorf("b waits on %+v, want a's overdue finish", f)
	}
}

func TestUnknownRunTimeGivesNoETA(t *testing.T) {
	w := newWorld(t)
	w.submit(t0, wl("a", 4, "")) // no annotation, no recorded run
	w.submit(t0.Add(time.Second), wl("b", 4, "1h"))
	r := w.estimate(t0.Add(time.Minute))
	e := r.Estimates["ns/b"]
	if e.At != nil {
		t.Fatalf("b: ETA %v, want none", e.At)
	}
	if r.UnknownRuns != 1 || !strings.Contains(e.Assumption, "1 admitted run(s) have no jetqueue.dev/expected-runtime") {
		t.Errorf("unknown runs %d, assumption %q", r.UnknownRuns, e.Assumption)
	}
}

func TestNeverFitsGivesNoETA(t *testing.T) {
	w := newWorld(t)
	w.submit(t0, wl("big", 5, "1h")) // more than the queue's 4 cpu
	r := w.estimate(t0.Add(time.Minute))
	if e := r.Estimates["ns/big"]; e.At != nil || !strings.Contains(e.Assumption, "not admitted even once every run finishes") {
		t.Fatalf("big: %+v", e)
	}
}

func TestExpectedRuntimeAnnotationIsValidated(t *testing.T) {
	for _, v := range []string{"soon", "0s", "-1h", "745h", strings.Repeat("9", 40)} {
		objs, err := api.Decode([]byte(wl("x", 1, v)))
		if err != nil {
			t.Fatal(err)
		}
		api.Default(objs[0])
		err = api.Validate(objs[0])
		if err == nil || !strings.Contains(err.Error(), "metadata.annotations[jetqueue.dev/expected-runtime]") {
			t.Errorf("%q: %v, want an error naming the annotation", v, err)
		}
	}
	objs, _ := api.Decode([]byte(wl("x", 1, "744h")))
	api.Default(objs[0])
	if err := api.Validate(objs[0]); err != nil {
		t.Errorf("744h: %v", err)
	}
}
