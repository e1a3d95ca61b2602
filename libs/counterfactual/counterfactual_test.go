package counterfactual

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// world records a log: config, then each workload submitted 1 ms apart,
// the engine settled after each.
type world struct {
	t   *testing.T
	rec *history.Recorder
	at  time.Time
}

func newWorld(t *testing.T, config string) *world {
	w := &world{t: t, rec: history.NewRecorder(), at: t0}
	for _, o := range decode(t, config) {
		if err := w.rec.Apply(o, w.at); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func decode(t *testing.T, yaml string) []api.Object {
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

func (w *world) submit(yaml string) {
	w.t.Helper()
	for _, o := range decode(w.t, yaml) {
		w.at = w.at.Add(time.Millisecond)
		if err := w.rec.Submit(o.(*api.Workload), w.at); err != nil {
			w.t.Fatal(err)
		}
		w.rec.Settle(w.at)
	}
}

func (w *world) search(key string) Result {
	w.t.Helper()
	res, err := Search(history.Builder(w.rec.Log, time.Time{}), key, w.at.Add(time.Second))
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func cq(name, cohort, preemption string, cells ...string) string {
	s := fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  cohort: %q
  namespaceSelector: {}
  preemption: {withinClusterQueue: %s}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
`, name, cohort, preemption)
	for _, c := range cells {
		s += c
	}
	return s + fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: %s}
spec: {clusterQueue: %s}
`, name, name)
}

// flavor renders one flavor's cpu quota: "4", "4 bl=1", "4 ll=1".
func flavor(name, nominal string, extra ...string) string {
	s := fmt.Sprintf("    - name: %s\n      resources:\n      - {name: cpu, nominalQuota: %q", name, nominal)
	for _, e := range extra {
		var k, v string
		fmt.Sscanf(e, "%2s=%s", &k, &v)
		s += fmt.Sprintf(", %s: %q", map[string]string{"bl": "borrowingLimit", "ll": "lendingLimit"}[k], v)
	}
	return s + "}\n"
}

const rf = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
`

func wl(ns, name string, cpu string, prio int32) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: %s}
spec:
  queueName: lq
  priority: %d
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: %q}}
`, name, ns, prio, cpu)
}

// kinds summarises changes as comparable values: kind, queue, amounts,
// workloads, threshold, displaced.
type summary struct {
	Kind      string
	Queue     string
	Amounts   []string
	Workloads []string
	Above     int32
	Flavor    string
	Displaces []string
}

func summarise(cs []Change) []summary {
	var out []summary
	for _, c := range cs {
		s := summary{Kind: c.Kind, Queue: c.ClusterQueue, Flavor: c.Flavor}
		for _, a := range c.Amounts {
			s.Amounts = append(s.Amounts, fmt.Sprintf("%s/%s+%d", a.Flavor, a.Resource, a.Value))
		}
		for _, r := range c.Workloads {
			s.Workloads = append(s.Workloads, r.String())
		}
		for _, r := range c.Displaces {
			s.Displaces = append(s.Displaces, r.String())
		}
		if c.Above != nil {
			s.Above = *c.Above
		}
		out = append(out, s)
	}
	return out
}

func TestSearch(t *testing.T) {
	cases := []struct {
		name   string
		config string
		subs   []string
		key    string
		want   []summary
	}{{
		// Queue a holds 4 cpu; a/big uses 3 and a/w asks 3: it needs
		// 3+3-4 = 2 more cpu (2000m), or a/big to finish. No preemption
		// in the queue, so no priority helps.
		name:   "quota or finish",
		config: rf + cq("a", "", "Never", flavor("rf", "4")),
		subs:   []string{wl("a", "big", "3", 0), wl("a", "w", "3", 0)},
		key:    "a/w",
		want: []summary{
			{Kind: KindQuota, Queue: "a", Amounts: []string{"rf/cpu+2000"}},
			{Kind: KindFinish, Queue: "a", Workloads: []string{"a/big"}},
		},
	}, {
		// Two admitted workloads of 2 and 1 cpu in a 4-cpu queue; a/w asks
		// 3: 3 free needed, 1 free now: finishing the 2-cpu one (the
		// fewest) frees enough. With LowerPriority preemption, a priority
		// above 5 (that of both) lets it preempt a/two (2 cpu, the
		// minimal victim set that frees 2).
		name:   "fewest to finish, priority preempts",
		config: rf + cq("a", "", "LowerPriority", flavor("rf", "4")),
		subs:   []string{wl("a", "one", "1", 5), wl("a", "two", "2", 5), wl("a", "w", "3", 0)},
		key:    "a/w",
		want: []summary{
			{Kind: KindQuota, Queue: "a", Amounts: []string{"rf/cpu+2000"}},
			{Kind: KindFinish, Queue: "a", Workloads: []string{"a/two"}},
			{Kind: KindPriority, Queue: "a", Above: 5, Displaces: []string{"a/two"}},
		},
	}, {
		// Cohort c: a (4, borrowingLimit 2) and b (4, lendingLimit 1).
		// a/w asks 6 with nothing else running: a may hold
		// min(4+1 lendable, 4+2) = 5, one short. b lending 1 more
		// (lendingLimit 2) makes it 6; a's borrowingLimit is not the
		// constraint, so raising it is not shown; 1 more nominal cpu in
		// a (5 + 1 = 6) works too.
		name:   "lendingLimit",
		config: rf + cq("a", "c", "Never", flavor("rf", "4", "bl=2")) + cq("b", "c", "Never", flavor("rf", "4", "ll=1")),
		subs:   []string{wl("a", "w", "6", 0)},
		key:    "a/w",
		want: []summary{
			{Kind: KindQuota, Queue: "a", Amounts: []string{"rf/cpu+1000"}},
			{Kind: KindLendingLimit, Queue: "b", Amounts: []string{"rf/cpu+1000"}},
		},
	}, {
		// Same cohort with a's borrowingLimit 0 and b lending 4: a may
		// hold 4; a/w asks 6: borrowingLimit 2 higher admits it, as
		// does 2 more nominal.
		name:   "borrowingLimit",
		config: rf + cq("a", "c", "Never", flavor("rf", "4", "bl=0")) + cq("b", "c", "Never", flavor("rf", "4")),
		subs:   []string{wl("a", "w", "6", 0)},
		key:    "a/w",
		want: []summary{
			{Kind: KindQuota, Queue: "a", Amounts: []string{"rf/cpu+2000"}},
			{Kind: KindBorrowingLimit, Queue: "a", Amounts: []string{"rf/cpu+2000"}},
		},
	}, {
		// Flavor spot is tainted and is a's only flavor: tolerating the
		// taint admits the workload; no amount of quota does.
		name: "toleration",
		config: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
` + cq("a", "", "Never", flavor("spot", "4")),
		subs: []string{wl("a", "w", "1", 0)},
		key:  "a/w",
		want: []summary{{Kind: KindToleration, Queue: "a", Flavor: "spot"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.config)
			for _, s := range tc.subs {
				w.submit(s)
			}
			if st := w.rec.Eng.Workload(tc.key).Status; st != engine.Pending {
				t.Fatalf("%s is %s before the search, want pending", tc.key, st)
			}
			res := w.search(tc.key)
			if res.Outcome != Found {
				t.Fatalf("outcome %s", res.Outcome)
			}
			if d := cmp.Diff(tc.want, summarise(res.Changes), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("changes (-want,+got):\n%s", d)
			}
			for _, c := range res.Changes {
				t.Log(c.Message)
			}
		})
	}
}

// TestChangesAdmitForReal makes each change the search proposes in the
// recorded world itself, as a user would (a new ClusterQueue spec, a
// finish, a priority change), and sees the workload admitted; the specs
// are written here from the scenario's arithmetic, not taken from the
// search.
func TestChangesAdmitForReal(t *testing.T) {
	setup := func(t *testing.T) *world {
		w := newWorld(t, rf+cq("a", "", "LowerPriority", flavor("rf", "4")))
		w.submit(wl("a", "one", "1", 5))
		w.submit(wl("a", "two", "2", 5))
		w.submit(wl("a", "w", "3", 0))
		return w
	}
	w := setup(t)
	res := w.search("a/w")
	if got := len(res.Changes); got != 3 {
		t.Fatalf("%d changes, want 3: %+v", got, summarise(res.Changes))
	}
	for _, c := range res.Changes {
		t.Run(c.Kind, func(t *testing.T) {
			w := setup(t)
			at := w.at.Add(time.Second)
			var err error
			switch c.Kind {
			case KindQuota:
				// 4 nominal + 2 more.
				err = w.rec.Apply(decode(t, cq("a", "", "LowerPriority", flavor("rf", "6")))[0], at)
				if c.Amounts[0].To != "6" {
					t.Errorf("quota to %s, want 6", c.Amounts[0].To)
				}
			case KindFinish:
				err = w.rec.Finish("a/two", at)
			case KindPriority:
				err = w.rec.SetPriority("a/w", 6, at)
			}
			if err != nil {
				t.Fatal(err)
			}
			w.rec.Settle(at)
			if st := w.rec.Eng.Workload("a/w").Status; st != engine.Admitted {
				t.Fatalf("a/w is %s after the change, want admitted", st)
			}
			if c.Kind == KindPriority {
				if st := w.rec.Eng.Workload("a/two").Status; st != engine.Pending {
					t.Errorf("a/two is %s, want pending (preempted)", st)
				}
			}
		})
	}
}

// TestRedact hides what the caller may not read.
func TestRedact(t *testing.T) {
	w := newWorld(t, rf+cq("a", "c", "Never", flavor("rf", "4"))+cq("b", "c", "Never", flavor("rf", "4")))
	w.submit(wl("b", "etl", "8", 0))
	w.submit(wl("a", "w", "2", 0))
	res := w.search("a/w")
	res.Redact("a/w", Visibility{Namespace: func(ns string) bool { return ns == "a" }, ClusterQueue: func(string) bool { return true }})
	var fin *Change
	for i := range res.Changes {
		if res.Changes[i].Kind == KindFinish {
			fin = &res.Changes[i]
		}
	}
	if fin == nil {
		t.Fatalf("no Finish change: %+v", summarise(res.Changes))
	}
	if d := cmp.Diff([]Ref{{Hidden: true}}, fin.Workloads); d != "" {
		t.Errorf("workloads (-want,+got):\n%s", d)
	}
	if want := "admissible if another workload finished"; fin.Message != want {
		t.Errorf("message %q, want %q", fin.Message, want)
	}
}

// taintedFlavor is a ResourceFlavor whose nodes carry the taint
// key=value:NoSchedule; plainFlavor one without taints.
func taintedFlavor(name, key, value string) string {
	return fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: %s}
spec:
  nodeTaints: [{key: %s, value: %q, effect: NoSchedule}]
`, name, key, value)
}

func plainFlavor(name string) string {
	return fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: %s}
`, name)
}

// tolerating is wl whose podSet tolerates key=value:NoSchedule.
func tolerating(ns, name, cpu string, prio int32, key, value string) string {
	return wl(ns, name, cpu, prio) + fmt.Sprintf("        tolerations: [{key: %s, operator: Equal, value: %q, effect: NoSchedule}]\n", key, value)
}

// resubmit deletes a workload and submits yaml in its place at at, as a
// user who changes a workload's pod template does: jetqueue has no
// update of a workload's spec, and the front door stamps the new one with
// its own creation time. The Recorder records no deletion, so the log
// misses it; only the live engine is read afterwards.
func (w *world) resubmit(key, yaml string, at time.Time) error {
	if err := w.rec.Eng.Delete(key, at); err != nil {
		return err
	}
	return w.rec.Submit(decode(w.t, yaml)[0].(*api.Workload), at)
}

func ofKind(cs []Change, kind string) []Change {
	var out []Change
	for _, c := range cs {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func statuses(e *engine.Engine) map[string]engine.Status {
	out := map[string]engine.Status{}
	for k, w := range e.Workloads() {
		out[k] = w.Status
	}
	return out
}

// TestLimitsAndTolerationsAdmitForReal is TestChangesAdmitForReal for
// the other kinds: the search proposes a borrowingLimit, a lendingLimit
// or a toleration, checked against the scenario's arithmetic; then, in a
// fresh copy of the world, the change is made as a user would (a new
// ClusterQueue spec written here, or the workload deleted and submitted
// again tolerating the taint) and the workload is admitted, displacing
// nothing.
func TestLimitsAndTolerationsAdmitForReal(t *testing.T) {
	cases := []struct {
		name   string
		config string
		subs   []string
		kind   string
		// want is the search's change of kind; from and to the limit
		// before and after (limits), taints those tolerated (Toleration).
		want     []summary
		from, to string
		taints   []corev1.Taint
		// apply makes the change for real at at; after is every
		// workload's status once settled; flavor is where a/w's cpu is
		// admitted.
		apply  func(w *world, at time.Time) error
		after  map[string]engine.Status
		flavor string
	}{{
		// Cohort c of a (4, borrowingLimit 1) and b (4). a/run holds 2
		// and b/x 1; a/w asks 5. a may hold 4+1 = 5 and would hold
		// 2+5 = 7: 2 short. borrowingLimit 1+2 = 3 lets it hold 7, and
		// the cohort has 4+4 = 8 for 7+1 = 8; borrowingLimit 2 (6) is
		// not enough.
		name: "borrowingLimit",
		config: rf + cq("a", "c", "Never", flavor("rf", "4", "bl=1")) +
			cq("b", "c", "Never", flavor("rf", "4")),
		subs: []string{wl("a", "run", "2", 0), wl("b", "x", "1", 0), wl("a", "w", "5", 0)},
		kind: KindBorrowingLimit,
		want: []summary{{Kind: KindBorrowingLimit, Queue: "a", Amounts: []string{"rf/cpu+2000"}}},
		from: "1", to: "3",
		apply: func(w *world, at time.Time) error {
			return w.rec.Apply(decode(w.t, cq("a", "c", "Never", flavor("rf", "4", "bl=3")))[0], at)
		},
		after:  map[string]engine.Status{"a/run": engine.Admitted, "b/x": engine.Admitted, "a/w": engine.Admitted},
		flavor: "rf",
	}, {
		// Cohort c of a (2, no limits) and b (4, lendingLimit 0) with
		// b/x holding 1 of b's own. a/w asks 4; the cohort lends a
		// 2+0 = 2: 2 short. b lending 0+2 = 2 gives a 4, and b keeps
		// 4-2 = 2 for itself, above b/x's 1; lending 1 gives a only 3.
		name: "lendingLimit",
		config: rf + cq("a", "c", "Never", flavor("rf", "2")) +
			cq("b", "c", "Never", flavor("rf", "4", "ll=0")),
		subs: []string{wl("b", "x", "1", 0), wl("a", "w", "4", 0)},
		kind: KindLendingLimit,
		want: []summary{{Kind: KindLendingLimit, Queue: "b", Amounts: []string{"rf/cpu+2000"}}},
		from: "0", to: "2",
		apply: func(w *world, at time.Time) error {
			return w.rec.Apply(decode(w.t, cq("b", "c", "Never", flavor("rf", "4", "ll=2")))[0], at)
		},
		after:  map[string]engine.Status{"b/x": engine.Admitted, "a/w": engine.Admitted},
		flavor: "rf",
	}, {
		// a has od (2) then spot (4, tainted spot=true:NoSchedule).
		// a/run holds od's 2; a/w asks 3: od is full and spot is not
		// tolerated. Tolerating the taint puts it on spot (3 of 4).
		name: "toleration",
		config: plainFlavor("od") + taintedFlavor("spot", "spot", "true") +
			cq("a", "", "Never", flavor("od", "2"), flavor("spot", "4")),
		subs:   []string{wl("a", "run", "2", 0), wl("a", "w", "3", 0)},
		kind:   KindToleration,
		want:   []summary{{Kind: KindToleration, Queue: "a", Flavor: "spot"}},
		taints: []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		apply: func(w *world, at time.Time) error {
			return w.resubmit("a/w", tolerating("a", "w", "3", 0, "spot", "true"), at)
		},
		after:  map[string]engine.Status{"a/run": engine.Admitted, "a/w": engine.Admitted},
		flavor: "spot",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setup := func(t *testing.T) *world {
				w := newWorld(t, tc.config)
				for _, s := range tc.subs {
					w.submit(s)
				}
				if st := w.rec.Eng.Workload("a/w").Status; st != engine.Pending {
					t.Fatalf("a/w is %s before the change, want pending", st)
				}
				return w
			}
			w := setup(t)
			got := ofKind(w.search("a/w").Changes, tc.kind)
			if d := cmp.Diff(tc.want, summarise(got), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("%s changes (-want,+got):\n%s", tc.kind, d)
			}
			c := got[0]
			t.Log(c.Message)
			if tc.from != "" && (c.Amounts[0].From != tc.from || c.Amounts[0].To != tc.to) {
				t.Errorf("limit from %s to %s, want from %s to %s", c.Amounts[0].From, c.Amounts[0].To, tc.from, tc.to)
			}
			if d := cmp.Diff(tc.taints, c.Taints, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("taints (-want,+got):\n%s", d)
			}

			w = setup(t)
			at := w.at.Add(time.Second)
			if err := tc.apply(w, at); err != nil {
				t.Fatal(err)
			}
			w.rec.Settle(at)
			if d := cmp.Diff(tc.after, statuses(w.rec.Eng)); d != "" {
				t.Fatalf("statuses after the change (-want,+got):\n%s", d)
			}
			ad := w.rec.Eng.Workload("a/w").Admission
			if f := ad.PodSets[0].Flavors[corev1.ResourceCPU]; f != tc.flavor {
				t.Errorf("a/w's cpu on %s, want %s", f, tc.flavor)
			}
		})
	}
}

// TestTolerationIsAResubmission: a workload can only come to tolerate a
// taint by being submitted again, so it is then the newest of its queue
// and may no longer preempt an equal-priority workload under
// LowerOrNewerEqualPriority. a (spot only, 4, tainted) holds a/tol (2,
// tolerating, submitted after a/w); a/w asks 3. Resubmitted tolerating,
// a/w is 1 short and newer than a/tol, so it stays pending: the search
// must not propose the toleration (a probe that kept a/w's first creation
// time did, displacing a/tol).
func TestTolerationIsAResubmission(t *testing.T) {
	setup := func(t *testing.T) *world {
		w := newWorld(t, taintedFlavor("spot", "spot", "true")+cq("a", "", "LowerOrNewerEqualPriority", flavor("spot", "4")))
		w.submit(wl("a", "w", "3", 0))
		w.submit(tolerating("a", "tol", "2", 0, "spot", "true"))
		return w
	}
	w := setup(t)
	if got := summarise(ofKind(w.search("a/w").Changes, KindToleration)); len(got) != 0 {
		t.Errorf("Toleration proposed: %+v", got)
	}

	w = setup(t)
	at := w.at.Add(time.Second)
	if err := w.resubmit("a/w", tolerating("a", "w", "3", 0, "spot", "true"), at); err != nil {
		t.Fatal(err)
	}
	w.rec.Settle(at)
	want := map[string]engine.Status{"a/w": engine.Pending, "a/tol": engine.Admitted}
	if d := cmp.Diff(want, statuses(w.rec.Eng)); d != "" {
		t.Errorf("statuses after resubmitting (-want,+got):\n%s", d)
	}
}
