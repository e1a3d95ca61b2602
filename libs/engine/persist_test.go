package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// snapLog is a random log for the snapshot tests: a world (randomWorld,
// sometimes with preemption and waitForPodsReady) and steps, each a batch
// of events applied to an engine followed by timers and a run to
// quiescence, as the simulator and a deciding service do.
type snapLog struct {
	world string
	steps []func(*Engine, time.Time)
}

func randomSnapLog(t testing.TB, seed uint64, steps int) snapLog {
	rng := rand.New(rand.NewPCG(seed, 7))
	world := randomWorld(rng)
	if rng.IntN(2) == 0 {
		world = strings.ReplaceAll(world, "  namespaceSelector: {}\n",
			"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
	}
	switch rng.IntN(3) {
	case 0:
		world += "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {enable: true, timeout: 3m, requeuingStrategy: {backoffLimitCount: 2, backoffBaseSeconds: 60}}\n"
	case 1:
		world += "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {enable: true, blockAdmission: true, timeout: 3m, requeuingStrategy: {backoffLimitCount: 1}}\n"
	}
	queues := strings.Count(world, "kind: LocalQueue")
	objs := decodeValid(t, world)
	log := snapLog{world: world}
	var names []string
	for step := range steps {
		var evs []func(*Engine, time.Time)
		for range rng.IntN(5) {
			name := fmt.Sprintf("w%d-%d", step, len(names))
			wl := decodeValid(t, randomWorkload(rng, name, queues))[0].(*api.Workload)
			created := t0.Add(time.Duration(step)*time.Minute + time.Duration(len(names))*time.Millisecond)
			names = append(names, wl.Namespace+"/"+wl.Name)
			evs = append(evs, func(e *Engine, _ time.Time) { _, _ = e.Submit(wl.DeepCopy(), created) })
		}
		for range rng.IntN(4) {
			if len(names) == 0 {
				break
			}
			k := names[rng.IntN(len(names))]
			switch rng.IntN(6) {
			case 0:
				evs = append(evs, func(e *Engine, now time.Time) { _ = e.Finish(k, now) })
			case 1:
				evs = append(evs, func(e *Engine, now time.Time) { _ = e.Delete(k, now) })
			case 2:
				p := int32(rng.IntN(4))
				evs = append(evs, func(e *Engine, now time.Time) { _ = e.SetPriority(k, p, now) })
			default:
				evs = append(evs, func(e *Engine, _ time.Time) { _ = e.PodsReady(k) })
			}
		}
		if rng.IntN(6) == 0 {
			// A configuration object goes and comes back.
			o := objs[rng.IntN(len(objs))]
			if _, ok := o.(*api.Configuration); !ok {
				m, _ := meta.Accessor(o)
				kind := strings.SplitN(api.ObjectRef(o), "/", 2)[0]
				evs = append(evs, func(e *Engine, now time.Time) {
					_ = e.DeleteConfig(kind, m.GetNamespace(), m.GetName(), now)
				})
				if rng.IntN(2) == 0 {
					evs = append(evs, func(e *Engine, now time.Time) { _, _ = e.Apply(o.DeepCopyObject().(api.Object), now) })
				}
			}
		}
		log.steps = append(log.steps, func(e *Engine, now time.Time) {
			for _, ev := range evs {
				ev(e, now)
			}
			e.FireTimers(now)
			e.RunToQuiescence(now)
		})
	}
	return log
}

func (l snapLog) start(t testing.TB) *Engine {
	e := New()
	e.RecordDecisions()
	for _, o := range decodeValid(t, l.world) {
		if _, err := e.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func stepTime(i int) time.Time { return t0.Add(time.Duration(i+1) * 2 * time.Minute) }

// stepOutput is what a step decided and evicted, rendered for comparison.
func stepOutput(t testing.TB, e *Engine) string {
	type target struct{ Key, Kind, Preemptor, PreemptorCQ string }
	var out []any
	for _, d := range e.DrainDecisions() {
		var ts []target
		for _, tg := range d.Targets {
			ts = append(ts, target{tg.Workload.Key, string(tg.Kind), tg.Preemptor, tg.PreemptorCQ})
		}
		out = append(out, []any{d.Kind, d.Key, d.Admission, d.Reason, d.EvictionReason, ts})
	}
	b, err := json.Marshal([]any{out, e.DrainEvictions()})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSnapshotRestoreDecidesAsFullReplay: over random logs, an engine
// restored from a snapshot taken after any step decides, step after step
// to the end of the log, exactly what the engine that went through the
// whole log decides, and ends in the same state (its snapshot, its next
// timer, its pending workloads' reasons).
func TestSnapshotRestoreDecidesAsFullReplay(t *testing.T) {
	const seeds, steps = 40, 24
	restores, refused := 0, 0
	for seed := range uint64(seeds) {
		log := randomSnapLog(t, seed, steps)
		// The full replay, with its output and snapshot after each step.
		full := log.start(t)
		stepOutput(t, full)
		var outs []string
		var snaps [][]byte
		for i, step := range log.steps {
			step(full, stepTime(i))
			outs = append(outs, stepOutput(t, full))
			snap, err := full.EncodeSnapshot()
			if errors.Is(err, ErrNotQuiet) {
				snap = nil
			} else if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
			snaps = append(snaps, snap)
		}
		end, endErr := full.EncodeSnapshot()
		endTimer, endHas := full.NextTimer()
		for at, snap := range snaps {
			if snap == nil {
				refused++
				continue
			}
			restored, err := DecodeSnapshot(snap)
			if err != nil {
				t.Fatalf("seed %d: snapshot after step %d does not decode: %v", seed, at, err)
			}
			restored.RecordDecisions()
			restores++
			for i := at + 1; i < len(log.steps); i++ {
				log.steps[i](restored, stepTime(i))
				if got := stepOutput(t, restored); got != outs[i] {
					t.Fatalf("seed %d: restored after step %d, step %d decided otherwise:\n%s",
						seed, at, i, cmp.Diff(outs[i], got))
				}
			}
			got, gotErr := restored.EncodeSnapshot()
			if !errors.Is(gotErr, endErr) || string(got) != string(end) {
				t.Fatalf("seed %d: restored after step %d ends in another state (%v, %v):\n%s", seed, at, endErr, gotErr, cmp.Diff(string(end), string(got)))
			}
			if timer, has := restored.NextTimer(); has != endHas || !timer.Equal(endTimer) {
				t.Fatalf("seed %d: restored after step %d: next timer %v %v, want %v %v", seed, at, timer, has, endTimer, endHas)
			}
		}
	}
	// Every state is tried; a state mid-cycle (blockAdmission waiting)
	// is refused, and at least half must be restorable for the test to
	// mean anything.
	if restores+refused != seeds*steps || restores < seeds*steps/2 {
		t.Fatalf("restored %d times, %d states not quiet: too few restores", restores, refused)
	}
	t.Logf("%d restores, %d states mid-cycle", restores, refused)
}

// TestSnapshotRoundTrip: decoding a snapshot and encoding it again gives
// the same bytes, at every step of every log.
func TestSnapshotRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		log := randomSnapLog(t, seed, 16)
		e := log.start(t)
		for i, step := range log.steps {
			step(e, stepTime(i))
			e.DrainDecisions()
			snap, err := e.EncodeSnapshot()
			if err != nil {
				continue
			}
			back, err := DecodeSnapshot(snap)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
			again, err := back.EncodeSnapshot()
			if err != nil || string(again) != string(snap) {
				t.Fatalf("seed %d step %d: round trip differs (%v):\n%s", seed, i, err, cmp.Diff(string(snap), string(again)))
			}
		}
	}
}

// TestSnapshotRefusesInconsistentState: hostile snapshots that are well
// formed but describe no state the engine could be in, or are not well
// formed, are refused with ErrBadSnapshot, never half-applied and never a
// panic.
func TestSnapshotRefusesInconsistentState(t *testing.T) {
	// The first quiet state, over seeded logs, with an admitted workload
	// and a queue holding one.
	var good []byte
	for seed := uint64(0); good == nil; seed++ {
		log := randomSnapLog(t, seed, 8)
		e := log.start(t)
		for i, step := range log.steps {
			step(e, stepTime(i))
			e.DrainDecisions()
			snap, err := e.EncodeSnapshot()
			if err != nil {
				continue
			}
			head, ws := splitSnap(t, snap)
			if slices.ContainsFunc(ws, func(w snapWorkload) bool { return w.Status == Admitted }) &&
				slices.ContainsFunc(head["queues"].([]any), func(q any) bool { return q.(map[string]any)["heap"] != nil }) {
				good = snap
				break
			}
		}
	}
	mutate := func(f func(head map[string]any, ws *[]snapWorkload)) []byte {
		head, ws := splitSnap(t, good)
		f(head, &ws)
		return joinSnap(t, head, ws)
	}
	first := func(m map[string]any, field string) map[string]any {
		return m[field].([]any)[0].(map[string]any)
	}
	onAdmitted := func(ws []snapWorkload, f func(w *snapWorkload)) {
		for i := range ws {
			if ws[i].Status == Admitted {
				f(&ws[i])
			}
		}
	}
	// A record with a byte more than its fields.
	r := snapReader{b: good}
	head := r.bytes()
	var w snapWriter
	w.bytes(head)
	w.uvarint(r.uvarint())
	w.bytes(append(slices.Clone(r.bytes()), 0))
	w.b = append(w.b, r.b...)
	longer := w.b
	cases := map[string][]byte{
		"not a snapshot":       []byte("{"),
		"truncated":            good[:len(good)/2],
		"a byte more":          append(slices.Clone(good), 0),
		"a record a byte more": longer,
		"more records than bytes": func() []byte {
			var w snapWriter
			w.bytes(head)
			w.uvarint(1 << 40)
			return w.b
		}(),
		"unknown status":        mutate(func(_ map[string]any, ws *[]snapWorkload) { (*ws)[0].Status = "running" }),
		"workload listed twice": mutate(func(_ map[string]any, ws *[]snapWorkload) { *ws = append(*ws, (*ws)[0]) }),
		"queue holds a stranger": mutate(func(m map[string]any, _ *[]snapWorkload) {
			first(m, "queues")["heap"] = []any{"nobody/here"}
		}),
		"admitted without admission": mutate(func(_ map[string]any, ws *[]snapWorkload) {
			onAdmitted(*ws, func(w *snapWorkload) { w.Admission = nil })
		}),
		"negative usage": mutate(func(_ map[string]any, ws *[]snapWorkload) {
			onAdmitted(*ws, func(w *snapWorkload) { w.Admission.Usage[0].Value = -1 })
		}),
		"bad selector": mutate(func(m map[string]any, _ *[]snapWorkload) { first(m, "queues")["selector"] = "?" }),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if string(data) == string(good) {
				t.Fatalf("the mutation changed nothing: the case tests nothing")
			}
			if _, err := DecodeSnapshot(data); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("DecodeSnapshot = %v, want ErrBadSnapshot", err)
			}
		})
	}
}

// splitSnap reads a snapshot's head as generic JSON and its workloads.
func splitSnap(t *testing.T, data []byte) (map[string]any, []snapWorkload) {
	t.Helper()
	r := snapReader{b: data}
	var head map[string]any
	if err := json.Unmarshal(r.bytes(), &head); err != nil {
		t.Fatal(err)
	}
	ws := make([]snapWorkload, r.count())
	for i := range ws {
		rr := snapReader{b: r.bytes()}
		if err := rr.workload(&ws[i]); err != nil {
			t.Fatal(err)
		}
	}
	if r.err != nil || len(r.b) > 0 {
		t.Fatalf("snapshot: %v, %d bytes left", r.err, len(r.b))
	}
	return head, ws
}

// joinSnap is splitSnap's inverse.
func joinSnap(t *testing.T, head map[string]any, ws []snapWorkload) []byte {
	t.Helper()
	h, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	var w snapWriter
	w.bytes(h)
	w.uvarint(uint64(len(ws)))
	for i := range ws {
		var rec snapWriter
		if err := rec.workload(&ws[i]); err != nil {
			t.Fatal(err)
		}
		w.bytes(rec.b)
	}
	return w.b
}

// TestSnapshotCodecCoversEveryField: the binary codec writes the fields of
// these types one by one (snapcodec.go), so a field added to any of them
// would be lost by a restore without a word. This lists the fields the
// codec knows: adding one fails here until the codec writes it.
func TestSnapshotCodecCoversEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{snapWorkload{}, []string{"Object", "PodSets", "Misconfigured", "Adjusted", "Created", "QueueTime", "ClusterQueue", "Priority", "LastTried", "Status",
			"Admission", "AdmittedAt", "AdmissionSeq", "Reason", "Evictions", "PodsReady", "RequeueCount", "RequeueAt",
			"QueuedIn", "FinishedIn", "PublishedReason", "CondPending", "Listed", "EvictedPriority", "BackoffUpdated", "EvictedUnset", "TimedOut", "TimerSeq",
			"FinishedQueued"}},
		{api.Workload{}, []string{"TypeMeta", "ObjectMeta", "Spec"}},
		{api.WorkloadSpec{}, []string{"PodSets", "QueueName", "PriorityClassName", "Priority", "PriorityClassSource", "Active"}},
		// reqs is a cache, rebuilt on demand.
		{scheduler.PodSet{}, []string{"Name", "Count", "MinCount", "PerPod", "NodeSelector", "Affinity", "Tolerations", "reqs"}},
		{metav1.TypeMeta{}, []string{"Kind", "APIVersion"}},
		{scheduler.Reason{}, []string{"Token", "PodSet", "Resource", "Flavor", "Cohort", "Shortfall", "Message"}},
		{scheduler.TriedFlavors{}, []string{"Index", "ClusterQueueGen", "CohortGen"}},
	} {
		var got []string
		for f := range reflect.TypeOf(c.v).Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, c.fields) {
			t.Errorf("%T has fields %v, the snapshot codec writes %v: write the new ones (snapcodec.go) and bump SnapshotVersion",
				c.v, got, c.fields)
		}
	}
}

// TestSnapshotCodecRoundTripsAnObject: a workload object with every part
// the codec writes set (and the nil/empty distinctions it keeps) comes
// back equal.
func TestSnapshotCodecRoundTripsAnObject(t *testing.T) {
	one, yes := int32(1), true
	for _, o := range []*api.Workload{
		{},
		{Spec: api.WorkloadSpec{PodSets: []api.PodSet{}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "kueue.x-k8s.io/v1beta1", Kind: "Workload"},
			ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"},
				CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))},
			Spec: api.WorkloadSpec{QueueName: "lq", PriorityClassName: "high", Priority: &one, PriorityClassSource: "x",
				Active: &yes, PodSets: []api.PodSet{{Name: "main", Count: 3, MinCount: &one, Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{NodeSelector: map[string]string{"k": "v"}, Containers: []corev1.Container{{Name: "c",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1500m")}}}}}}}}}},
		{Spec: api.WorkloadSpec{PodSets: []api.PodSet{{Name: "a", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "z", Operator: corev1.NodeSelectorOpIn, Values: []string{"1"}}}}}}}},
			Containers: []corev1.Container{{Name: "c"}}}}}, {Name: "b", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{}, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("0")}}}}}}}}}},
	} {
		kept, info := withoutTemplates(o), buildInfo(o, "ns/w", time.Time{}, nil)
		var w snapWriter
		if err := w.object(kept); err != nil {
			t.Fatal(err)
		}
		if err := w.podSets(info.PodSets); err != nil {
			t.Fatal(err)
		}
		r := snapReader{b: w.b}
		back, pss := r.object(), r.podSets()
		if r.err != nil || len(r.b) > 0 {
			t.Fatalf("%v, %d bytes left", r.err, len(r.b))
		}
		if d := cmp.Diff(kept, back); d != "" {
			t.Errorf("object differs after the codec (-before +after):\n%s", d)
		}
		if d := cmp.Diff(info.PodSets, pss, cmp.AllowUnexported(scheduler.PodSet{})); d != "" {
			t.Errorf("podSets differ after the codec (-before +after):\n%s", d)
		}
	}
}

// TestSnapshotRefusesNegativePodSets: a snapshot is external input, and
// a negative count or request would make quota that is not there.
func TestSnapshotRefusesNegativePodSets(t *testing.T) {
	minus := int32(-1)
	for name, ps := range map[string]scheduler.PodSet{
		"count":    {Name: "a", Count: -1},
		"minCount": {Name: "a", Count: 1, MinCount: &minus},
		"request":  {Name: "a", Count: 1, PerPod: map[corev1.ResourceName]int64{corev1.ResourceCPU: -1000}},
	} {
		var w snapWriter
		if err := w.podSets([]scheduler.PodSet{ps}); err != nil {
			t.Fatal(err)
		}
		r := snapReader{b: w.b}
		if got := r.podSets(); r.err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, got)
		}
	}
}

// TestSubmitKeepsNoTemplate: the engine keeps a workload's object without
// its podSets and the caller's object as it was, and a workload restored
// from a snapshot has the scheduler view the submitted one had.
func TestSubmitKeepsNoTemplate(t *testing.T) {
	e := New()
	wl := &api.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: api.WorkloadSpec{QueueName: "lq",
		PodSets: []api.PodSet{{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}}}
	before := wl.DeepCopy()
	w, err := e.Submit(wl, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if w.Object.Spec.PodSets != nil {
		t.Errorf("the engine keeps %d podSets with their templates", len(w.Object.Spec.PodSets))
	}
	if d := cmp.Diff(before, wl); d != "" {
		t.Errorf("Submit changed the caller's object (-before +after):\n%s", d)
	}
	// Limits without requests (memory): Kueue's AdjustResources case.
	if !w.adjusted || len(w.Info.PodSets) != 1 || w.Info.PodSets[0].PerPod[corev1.ResourceCPU] != 1000 || len(w.Info.PodSets[0].Tolerations) != 1 {
		t.Errorf("adjusted %v, podSets %+v", w.adjusted, w.Info.PodSets)
	}
	snap, err := e.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Workload("ns/w")
	if d := cmp.Diff(w.Info, got.Info, cmp.AllowUnexported(scheduler.PodSet{})); d != "" || got.adjusted != w.adjusted {
		t.Errorf("restored workload differs (adjusted %v, -before +after):\n%s", got.adjusted, d)
	}
}
