package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/queue"
)

// cloneOp is one event or run, applied alike to the engines compared.
type cloneOp struct {
	name string
	do   func(e *Engine, now time.Time)
}

// randomCloneOps draws n events and runs: every kind of change the engine
// takes from outside, so that a part of the state Clone shares by mistake
// shows as a difference. keys are the workloads it may name; the events
// submit more, named after tag.
func randomCloneOps(t testing.TB, rng *rand.Rand, world string, keys []string, n int, tag string) []cloneOp {
	objs := decodeValid(t, world)
	queues := strings.Count(world, "kind: LocalQueue")
	keys = slices.Clone(keys)
	var ops []cloneOp
	for i := range n {
		r := rng.IntN(18)
		if len(keys) == 0 {
			r = 0
		}
		k := ""
		if len(keys) > 0 {
			k = keys[rng.IntN(len(keys))]
		}
		op := cloneOp{name: fmt.Sprintf("#%d ", i)}
		switch r {
		case 0, 1, 2:
			wl := decodeValid(t, randomWorkload(rng, fmt.Sprintf("%s-%d", tag, i), queues))[0].(*api.Workload)
			if rng.IntN(6) == 0 {
				wl.Spec.Active = ptr(false)
			}
			keys = append(keys, wl.Namespace+"/"+wl.Name)
			op.name += "submit " + wl.Namespace + "/" + wl.Name
			// Each engine gets its own object, as the services' replicas do.
			op.do = func(e *Engine, now time.Time) { _, _ = e.Submit(wl.DeepCopy(), now) }
		case 3:
			op.name += "finish " + k
			op.do = func(e *Engine, now time.Time) { _ = e.Finish(k, now) }
		case 4:
			op.name += "delete " + k
			op.do = func(e *Engine, now time.Time) { _ = e.Delete(k, now) }
		case 5:
			active := rng.IntN(2) == 0
			op.name += fmt.Sprintf("set active %s %v", k, active)
			op.do = func(e *Engine, now time.Time) { _ = e.SetActive(k, active, now) }
		case 6:
			p := int32(rng.IntN(4))
			op.name += fmt.Sprintf("set priority %s %d", k, p)
			op.do = func(e *Engine, now time.Time) { _ = e.SetPriority(k, p, now) }
		case 7:
			op.name += "pods ready " + k
			op.do = func(e *Engine, _ time.Time) { _ = e.PodsReady(k) }
		case 8:
			op.name += "fire timers"
			op.do = func(e *Engine, now time.Time) { e.FireTimers(now) }
		case 9:
			// A configuration object goes, and may come back.
			o := objs[rng.IntN(len(objs))]
			back := rng.IntN(2) == 0
			m, _ := meta.Accessor(o)
			kind := strings.SplitN(api.ObjectRef(o), "/", 2)[0]
			op.name += fmt.Sprintf("delete %s (back: %v)", api.ObjectRef(o), back)
			op.do = func(e *Engine, now time.Time) {
				if _, ok := o.(*api.Configuration); !ok {
					_ = e.DeleteConfig(kind, m.GetNamespace(), m.GetName(), now)
				}
				if back {
					_, _ = e.Apply(o.DeepCopyObject().(api.Object), now)
				}
			}
		case 10:
			op.name += "cycle"
			op.do = func(e *Engine, now time.Time) { e.Cycle(now) }
		case 11, 12:
			op.name += "run"
			op.do = func(e *Engine, now time.Time) { e.RunToQuiescence(now) }
		case 13:
			op.name += "settle"
			op.do = func(e *Engine, now time.Time) { e.Settle(now) }
		case 14:
			op.name += "preempted " + k
			op.do = func(e *Engine, now time.Time) {
				e.ApplyEviction(k, Eviction{Reason: EvictedByPreemption, Preemptor: "x/y", PreemptorCQ: "cq0"}, now)
			}
		case 15:
			op.name += "unadmit " + k
			op.do = func(e *Engine, now time.Time) { _ = e.Unadmit(k, now) }
		case 16:
			op.name += "timeout " + k
			op.do = func(e *Engine, now time.Time) { e.ApplyTimeout(k, 1, now.Add(time.Minute), now) }
		case 17:
			s := Shard{}
			if rng.IntN(2) == 0 {
				s = Shard{Index: rng.IntN(2), Count: 2}
			}
			op.name += fmt.Sprintf("shard %+v", s)
			op.do = func(e *Engine, _ time.Time) { e.SetShard(s, nil) }
		}
		ops = append(ops, op)
	}
	return ops
}

// cloneTrace renders what an engine decided and evicted since the last
// call (draining both) and the state it is in: its snapshot encoding, or
// why it has none, its Stats and its next timer.
func cloneTrace(t testing.TB, e *Engine) string {
	out := stepOutput(t, e)
	enc, err := e.EncodeSnapshot()
	next, has := e.NextTimer()
	return fmt.Sprintf("decided %s\nsnapshot %q (%v)\nstats %s\nnext timer %v %v", out, unparkedSorted(t, enc), err,
		statsText(e.Stats()), next, has)
}

// unparkedSorted is a snapshot with its unparked workloads in key order.
// The queues record them in the order they walked their parked sets,
// maps: engines in one state may list them in different orders, which
// only a run's fingerprint reads, as a sum.
func unparkedSorted(t testing.TB, enc []byte) []byte {
	if enc == nil {
		return nil
	}
	r := snapReader{b: enc}
	var head map[string]any
	if err := json.Unmarshal(r.bytes(), &head); err != nil || r.err != nil {
		t.Fatalf("snapshot head: %v %v", err, r.err)
	}
	if u, ok := head["unparked"].([]any); ok {
		slices.SortFunc(u, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	}
	b, err := json.Marshal(head)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, r.b...)
}

// statsText renders Stats with the values its pointers point to.
func statsText(st Stats) string {
	var b strings.Builder
	deref := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	for _, cq := range st.ClusterQueues {
		quotas := cq.Quotas
		cq.Quotas = nil
		fmt.Fprintf(&b, "%+v\n", cq)
		for _, q := range quotas {
			fmt.Fprintf(&b, "  %v %d %v %v\n", q.FlavorResource, q.Nominal, deref(q.BorrowingLimit), deref(q.Lending))
		}
	}
	for _, lq := range st.LocalQueues {
		fmt.Fprintf(&b, "%+v\n", lq)
	}
	// fmt prints a map in key order.
	fmt.Fprintf(&b, "%+v\n", st.Unadmitted)
	return b.String()
}

// drive applies ops to each engine in turn and fails at the first op
// after which they differ; it returns the traces.
func drive(t *testing.T, what string, ops []cloneOp, from time.Time, es ...*Engine) []string {
	t.Helper()
	var traces []string
	for i, op := range ops {
		now := from.Add(time.Duration(i) * 40 * time.Second)
		var first string
		for j, e := range es {
			op.do(e, now)
			got := cloneTrace(t, e)
			if j == 0 {
				first = got
				continue
			}
			if got != first {
				t.Fatalf("%s: after %s, engine %d differs from engine 0 (-0 +%d):\n%s", what, op.name, j, j, cmp.Diff(first, got))
			}
		}
		traces = append(traces, first)
	}
	return traces
}

// cloneSource is an engine to clone, its world, and a time after every
// event it took.
type cloneSource struct {
	name  string
	e     *Engine
	world string
	next  time.Time
}

// cloneSources are engines in every kind of state Clone must copy: the
// random logs of the snapshot tests after each step (preemption, PodsReady
// timeouts and backoffs, configuration going and coming back), with their
// decisions drained or not; the random worlds of the property tests; and
// states built on purpose: a preemption issued with its evictions not
// drained, armed and expired PodsReady timers, inactive workloads, a
// finished workload still queued, the copy a reissued preemption leaves
// for its timer, and a sharded engine.
func cloneSources(t *testing.T, seeds int) []cloneSource {
	var out []cloneSource
	for seed := range uint64(seeds) {
		log := randomSnapLog(t, seed, 12)
		for last := 2; last < len(log.steps); last += 3 {
			e := log.start(t)
			for i, step := range log.steps[:last+1] {
				step(e, stepTime(i))
			}
			if e.pass != nil {
				continue
			}
			if (int(seed)+last/3)%3 != 0 {
				e.DrainDecisions()
			}
			out = append(out, cloneSource{fmt.Sprintf("log %d step %d", seed, last), e, log.world, stepTime(last + 1)})
		}
	}
	for seed := range uint64(seeds) {
		e, world := randomEngine(t, seed)
		out = append(out, cloneSource{fmt.Sprintf("random world %d", seed), e, world, t0.Add(time.Second)})
	}

	e := New()
	e.RecordDecisions()
	apply(t, e, preemptWorld)
	submit(t, e, cpuWorkload("cq-a", "low", 4)+"---\n"+cpuWorkload("cq-a", "other", 0))
	e.RunToQuiescence(t0)
	submit(t, e, cpuWorkloadPriority("cq-a", "high", 4, 10))
	e.Cycle(t0)
	e.DrainDecisions()
	if len(e.evictions) == 0 {
		t.Fatal("preempting: no eviction issued")
	}
	out = append(out, cloneSource{"preempting", e, preemptWorld, t0.Add(time.Second)})

	// Under blockAdmission, each admission waits for the last one's
	// PodsReady: "late" never gets there and times out, "armed" is
	// admitted during late's backoff and waits for its own deadline.
	e = New()
	e.RecordDecisions()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "ready", 2))
	e.RunToQuiescence(t0)
	must(t, e.PodsReady("cq-a/ready"))
	submit(t, e, cpuWorkload("cq-a", "stopped", 2)+"---\n"+cpuWorkload("cq-a", "huge", 20))
	e.RunToQuiescence(t0)
	must(t, e.PodsReady("cq-a/stopped"))
	must(t, e.SetActive("cq-a/stopped", false, t0))
	submit(t, e, cpuWorkload("cq-a", "late", 2)+"---\n"+cpuWorkload("cq-a", "idle", 1))
	must(t, e.SetActive("cq-a/idle", false, t0))
	e.RunToQuiescence(t0)
	deadline := t0.Add(5 * time.Minute)
	e.FireTimers(deadline)
	submit(t, e, cpuWorkload("cq-a", "armed", 2))
	e.RunToQuiescence(deadline)
	want := map[string]Status{"cq-a/ready": Admitted, "cq-a/stopped": Inactive, "cq-a/huge": Pending,
		"cq-a/late": Pending, "cq-a/idle": Inactive, "cq-a/armed": Admitted}
	if d := cmp.Diff(want, statusOf(e)); d != "" || e.Workload("cq-a/late").RequeueAt.IsZero() || e.pass != nil {
		t.Fatalf("timers: (-want +got):\n%s", d)
	}
	e.DrainDecisions()
	out = append(out, cloneSource{"timers", e, podsReadyWorld, deadline.Add(time.Second)})

	// A workload that finished without quota before its LocalQueue
	// existed is queued once it does (listed, finishedQueued).
	e = New()
	world := strings.Split(podsReadyWorld, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue")
	apply(t, e, world[0])
	submit(t, e, cpuWorkload("cq-a", "early", 2))
	must(t, e.Finish("cq-a/early", t0))
	apply(t, e, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue"+world[1])
	if len(e.finishedQueued) == 0 {
		t.Fatal("finished queued: none")
	}
	out = append(out, cloneSource{"finished queued", e, podsReadyWorld, t0.Add(time.Second)})

	// A timed-out workload preempted during its backoff keeps a copy for
	// the timeout's timer to push (Workload.stale).
	e = New()
	e.RecordDecisions()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "w", 2))
	e.RunToQuiescence(t0)
	e.FireTimers(deadline)
	if !e.ApplyEviction("cq-a/w", Eviction{Reason: EvictedByPreemption}, deadline) || e.Workload("cq-a/w").stale == nil {
		t.Fatal("stale: no copy left")
	}
	out = append(out, cloneSource{"stale", e, podsReadyWorld, deadline.Add(time.Second)})

	// The backoff of a timed-out workload whose priority changed meanwhile
	// ends: its queue holds the copy of it as it was evicted (see
	// ApplyRequeue), not its own view.
	e = New()
	e.RecordDecisions()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "w", 2))
	e.RunToQuiescence(t0)
	e.FireTimers(deadline)
	must(t, e.SetPriority("cq-a/w", 5, deadline))
	e.FireTimers(deadline.Add(time.Minute))
	if w := e.Workload("cq-a/w"); w.queuedIn == "" || !slices.ContainsFunc(e.queues.States()[0].Heap,
		func(en *queue.Entry) bool { return en.Workload.Key == w.Info.Key && en.Workload != w.Info }) {
		t.Fatal("requeued copy: the queue holds the workload's own view")
	}
	out = append(out, cloneSource{"requeued copy", e, podsReadyWorld, deadline.Add(time.Minute + time.Second)})

	log := randomSnapLog(t, 3, 6)
	e = log.start(t)
	for i, step := range log.steps {
		step(e, stepTime(i))
	}
	e.DrainDecisions()
	e.SetShard(Shard{Index: 1, Count: 2}, func(tree string) bool { return strings.HasSuffix(tree, "1") })
	out = append(out, cloneSource{"sharded", e, log.world, stepTime(len(log.steps))})

	// Events since the last run: the fingerprint kept from it notes the
	// workloads they touched, a deleted one included, for the next run.
	for seed, found := uint64(0), 0; found < 3; seed++ {
		log := randomSnapLog(t, seed, 6)
		e := log.start(t)
		for i, step := range log.steps {
			step(e, stepTime(i))
		}
		e.DrainDecisions()
		keys := sortedKeys(e.Workloads())
		if len(keys) < 3 {
			continue
		}
		now := stepTime(len(log.steps))
		must(t, e.Delete(keys[0], now))
		must(t, e.Finish(keys[len(keys)-1], now))
		must(t, e.SetPriority(keys[len(keys)/2], 3, now))
		submit(t, e, randomWorkload(rand.New(rand.NewPCG(seed, 3)), "late", strings.Count(log.world, "kind: LocalQueue")))
		if !e.fpValid || len(e.fpTouched) < 4 || e.pass != nil {
			// The fingerprint is not kept: a configuration change, or a
			// waiting cycle the events resumed; or one that still waits.
			continue
		}
		found++
		out = append(out, cloneSource{fmt.Sprintf("touched %d", seed), e, log.world, now.Add(time.Second)})
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCloneEncodesAsItsOriginal: a clone's snapshot is its original's,
// byte for byte, or refused alike.
func TestCloneEncodesAsItsOriginal(t *testing.T) {
	for _, src := range cloneSources(t, 12) {
		want, wantErr := src.e.EncodeSnapshot()
		got, gotErr := src.e.Clone().EncodeSnapshot()
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
			t.Fatalf("%s: the clone encodes otherwise (%v, %v):\n%s", src.name, wantErr, gotErr, cmp.Diff(string(want), string(got)))
		}
	}
}

// TestCloneDecidesAsARestore: a clone is what Clone replaces, a restore
// of its original's snapshot: given the same random events and runs, the
// two decide and evict the same, and are in the same state (snapshot,
// Stats, next timer) after each. Neither the original nor a second
// clone sees any of it: the original still encodes as it did and, given
// other events, decides as another restore does; the second clone then
// still encodes as the original did, and goes through the first clone's
// events exactly as the first did. A state no snapshot can hold (a copy
// left for a timer, decisions not drained) or that a snapshot does not
// keep (sharding) is compared with the original itself instead.
func TestCloneDecidesAsARestore(t *testing.T) {
	restores, originals := 0, 0
	for n, src := range cloneSources(t, 12) {
		rng := rand.New(rand.NewPCG(uint64(n), 11))
		keys := sortedKeys(src.e.Workloads())
		ops := randomCloneOps(t, rng, src.world, keys, 30, "a")
		enc, encErr := src.e.EncodeSnapshot()
		first, second := src.e.Clone(), src.e.Clone()
		if encErr != nil || src.e.Sharded() {
			traces := drive(t, src.name+": clone beside its original", ops, src.next, src.e, first)
			if got := drive(t, src.name+": second clone", ops, src.next, second); !slices.Equal(got, traces) {
				t.Fatalf("%s: the second clone decided otherwise than the first:\n%s", src.name, cmp.Diff(traces, got))
			}
			originals++
			continue
		}
		restores++
		restore := func() *Engine {
			d, err := DecodeSnapshot(enc)
			if err != nil {
				t.Fatal(err)
			}
			if src.e.recording {
				d.RecordDecisions()
			}
			return d
		}
		traces := drive(t, src.name+": clone beside a restore", ops, src.next, restore(), first)
		if again, _ := src.e.EncodeSnapshot(); string(again) != string(enc) {
			t.Fatalf("%s: driving the clone changed its original:\n%s", src.name, cmp.Diff(string(enc), string(again)))
		}
		others := randomCloneOps(t, rng, src.world, keys, 30, "b")
		drive(t, src.name+": original beside a restore", others, src.next, restore(), src.e)
		if again, _ := second.EncodeSnapshot(); string(again) != string(enc) {
			t.Fatalf("%s: driving the original changed its clone:\n%s", src.name, cmp.Diff(string(enc), string(again)))
		}
		if got := drive(t, src.name+": second clone", ops, src.next, second); !slices.Equal(got, traces) {
			t.Fatalf("%s: the second clone decided otherwise than the first:\n%s", src.name, cmp.Diff(traces, got))
		}
	}
	if restores < 40 || originals < 8 {
		t.Fatalf("%d sources compared with a restore, %d with their original: too few", restores, originals)
	}
	t.Logf("%d sources compared with a restore, %d with their original", restores, originals)
}

// preemptingSource is an engine of a random world whose queues preempt,
// with 30 workloads run to quiescence and 10 more no cycle tried yet (the
// first attempts of an engine and its copies fill the caches of their
// podSets), and n random operations to drive copies of it with.
func preemptingSource(t *testing.T, seed, stream uint64, n int) (*Engine, []cloneOp) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, stream))
	world := strings.ReplaceAll(randomWorld(rng), "  namespaceSelector: {}\n",
		"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
	e := New()
	e.RecordDecisions()
	apply(t, e, world)
	for i := range 30 {
		submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", i), strings.Count(world, "kind: LocalQueue")))
	}
	e.RunToQuiescence(t0)
	for i := range 10 {
		submit(t, e, randomWorkload(rng, fmt.Sprintf("x%d", i), strings.Count(world, "kind: LocalQueue")))
	}
	return e, randomCloneOps(t, rng, world, sortedKeys(e.Workloads()), n, "a")
}

// TestCloneRunsBesideItsOriginal: an engine and its clone, driven at once
// on two goroutines, decide alike. Under the race detector (go test
// -race), it also proves that they write nothing they share: the caches
// the scheduler keeps in a workload's podSets and in admitted records
// included, which preemption fills.
func TestCloneRunsBesideItsOriginal(t *testing.T) {
	for seed := range uint64(4) {
		e, ops := preemptingSource(t, seed, 7, 60)
		c := e.Clone()
		var traces [2][]string
		var wg sync.WaitGroup
		for i, x := range []*Engine{e, c} {
			wg.Go(func() {
				for j, op := range ops {
					now := t0.Add(time.Duration(j+1) * 40 * time.Second)
					op.do(x, now)
					traces[i] = append(traces[i], cloneTrace(t, x))
				}
			})
		}
		wg.Wait()
		if d := cmp.Diff(traces[0], traces[1]); d != "" {
			t.Fatalf("seed %d: the clone decided otherwise than its original (-original +clone):\n%s", seed, d)
		}
	}
}

// TestClonesAtOnce: one engine cloned on several goroutines at once, each
// copy then driven alike, decide alike. Under the race detector it proves
// that cloning only reads its source: a counterfactual search takes its
// probes' copies of one engine concurrently.
func TestClonesAtOnce(t *testing.T) {
	for seed := range uint64(3) {
		e, ops := preemptingSource(t, seed, 11, 40)
		const copies = 4
		var traces [copies][]string
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() {
				c := e.Clone()
				for j, op := range ops {
					op.do(c, t0.Add(time.Duration(j+1)*40*time.Second))
					traces[i] = append(traces[i], cloneTrace(t, c))
				}
			})
		}
		wg.Wait()
		for i := 1; i < copies; i++ {
			if d := cmp.Diff(traces[0], traces[i]); d != "" {
				t.Fatalf("seed %d: copy %d decided otherwise than copy 0 (-0 +%d):\n%s", seed, i, i, d)
			}
		}
	}
}

// TestClonePanicsWhileACycleWaits: the scheduler's walk of a cycle
// waiting for PodsReady is not the engine's to copy.
func TestClonePanicsWhileACycleWaits(t *testing.T) {
	e := New()
	apply(t, e, podsReadyWorld)
	submit(t, e, cpuWorkload("cq-a", "zero", 1))
	e.RunToQuiescence(t0)
	must(t, e.PodsReady("cq-a/zero"))
	submit(t, e, cpuWorkload("cq-a", "first", 2)+"---\n"+cpuWorkload("cq-a", "second", 2))
	e.RunToQuiescence(t0)
	if e.pass == nil {
		t.Fatal("no cycle waits for PodsReady")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Clone copied a waiting cycle")
		}
	}()
	e.Clone()
}

// TestChangesLeaveTheSubmittedObject: SetActive and SetPriority replace
// a workload's object, which the submitter may share, rather than write
// it. A clone shares it too (see TestCloneDecidesAsARestore).
func TestChangesLeaveTheSubmittedObject(t *testing.T) {
	for name, change := range map[string]func(e *Engine, key string) error{
		"SetActive":   func(e *Engine, key string) error { return e.SetActive(key, false, t0) },
		"SetPriority": func(e *Engine, key string) error { return e.SetPriority(key, 7, t0) },
	} {
		e := New()
		apply(t, e, podsReadyWorld)
		wl := decodeValid(t, cpuWorkload("cq-a", "w", 2))[0].(*api.Workload)
		if _, err := e.Submit(wl, t0); err != nil {
			t.Fatal(err)
		}
		before := wl.DeepCopy()
		must(t, change(e, "cq-a/w"))
		if d := cmp.Diff(before, wl); d != "" {
			t.Errorf("%s changed the submitted object (-before +after):\n%s", name, d)
		}
		if o := e.Workload("cq-a/w").Object; cmp.Equal(before, o) {
			t.Errorf("%s left the engine's object as it was", name)
		}
	}
}

// TestCloneCoversEveryField: Clone decides, field by field, what to copy,
// share or drop (clone.go). A field added to one of these types fails
// here until Clone has decided about it.
func TestCloneCoversEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{Engine{}, []string{"toDrain", "flavors", "clusterQueues", "localQueues", "wpcs", "pcs", "config", "compiled",
			"inactive", "usage", "workloads", "pending", "deactivated", "lqUse", "queues", "evictions", "podsReady",
			"recording", "decisions", "epoch", "fpEpoch", "fpSum", "fpValid", "fpTouched", "inRun", "changes",
			"settledAt", "settled", "condWrites", "noPreemption", "cutLoop", "admissionSeq", "timerSeq", "evictedAt", "evictedTick",
			"admittedHash", "pass", "finishedQueued", "cohortGens", "onCycle", "triedHashed", "releasedIn",
			"afterCycle", "resBuf", "cellBuf", "snap", "snapPreempting", "snapDirty", "snapOps", "nsLabels", "shard",
			"heldTree", "admissions", "requests"}},
		{Workload{}, []string{"Object", "Info", "Status", "Admission", "AdmittedAt", "Reason", "Evictions",
			"PodsReady", "RequeueCount", "RequeueAt", "evictedPriority", "backoffUpdated", "evictedUnset", "timedOut",
			"stale", "staleAt", "admissionSeq", "timerSeq", "record", "queuedIn", "hash", "hashEpoch", "hashGroup",
			"keyHash", "triedFor", "triedFrom", "triedHash", "finishedIn", "listed", "publishedReason", "condPending", "adjusted"}},
		{cqState{}, []string{"admitted", "total", "generation", "dirty"}},
		{lqUse{}, []string{"reserving", "total"}},
	} {
		var got []string
		for f := range reflect.TypeOf(c.v).Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, c.fields) {
			t.Errorf("%T has fields %v, Clone knows %v: decide how Clone copies the new ones (clone.go)", c.v, got, c.fields)
		}
	}
}

// cloneBacklog is the engine the Clone and DecodeSnapshot benchmarks
// copy, built once: 30,000 workloads over 150 ClusterQueues in 15
// cohorts, run to quiescence, which leaves some thousands admitted and
// the rest pending.
func cloneBacklog(b *testing.B) (*Engine, []byte) {
	backlog.once.Do(func() {
		backlog.e = loadedEngine(b, 150, 15, 30_000, 1)
		backlog.e.RunToQuiescence(t0.Add(time.Hour))
		var err error
		if backlog.snap, err = backlog.e.EncodeSnapshot(); err != nil {
			b.Fatal(err)
		}
	})
	return backlog.e, backlog.snap
}

var backlog struct {
	once sync.Once
	e    *Engine
	snap []byte
}

func reportBacklog(b *testing.B, e *Engine) {
	admitted := 0
	for _, st := range e.usage {
		admitted += len(st.admitted)
	}
	b.ReportMetric(float64(len(e.pending)), "pending")
	b.ReportMetric(float64(admitted), "admitted")
}

// BenchmarkClone copies the backlog in memory.
func BenchmarkClone(b *testing.B) {
	e, _ := cloneBacklog(b)
	for b.Loop() {
		e.Clone()
	}
	reportBacklog(b, e)
}

// BenchmarkDecodeSnapshot copies the backlog as Clone replaced: from its
// snapshot encoding.
func BenchmarkDecodeSnapshot(b *testing.B) {
	e, snap := cloneBacklog(b)
	for b.Loop() {
		if _, err := DecodeSnapshot(snap); err != nil {
			b.Fatal(err)
		}
	}
	reportBacklog(b, e)
}
