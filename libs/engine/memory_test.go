package engine

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
)

// footprint counts what the engine holds per workload: every map, index
// and queue that a workload enters at some point of its life.
type footprint struct {
	Workloads, Pending, FinishedQueued, Admitted, Queued, QueueIndex, Parked, Unparked int
}

func (e *Engine) footprint() footprint {
	f := footprint{Workloads: len(e.workloads), Pending: len(e.pending), FinishedQueued: len(e.finishedQueued)}
	for _, st := range e.usage {
		f.Admitted += len(st.admitted)
	}
	f.Queued, f.QueueIndex, f.Parked, f.Unparked = e.queues.Footprint()
	return f
}

// churnWorld is one ClusterQueue of cpu quota in a cohort with a second
// one, so workloads are admitted, borrow, park and wait.
func churnWorld(tb testing.TB, cpu string) *Engine {
	tb.Helper()
	e := New()
	must := func(_ Action, err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(e.Apply(&api.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "rf"}}, t0))
	for _, name := range []string{"cq-a", "cq-b"} {
		cq := &api.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cq.Spec.Cohort = "co"
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
		cq.Spec.QueueingStrategy = api.BestEffortFIFO
		cq.Spec.ResourceGroups = []api.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []api.FlavorQuotas{{Name: "rf", Resources: []api.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu)}}}}}}
		must(e.Apply(cq, t0))
		must(e.Apply(&api.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: name},
			Spec: api.LocalQueueSpec{ClusterQueue: name}}, t0))
	}
	return e
}

// churnWorkload is one pod of 1 cpu in namespace cq-a or cq-b.
func churnWorkload(i int, prio int32) *api.Workload {
	wl := &api.Workload{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wl-%d", i), Namespace: []string{"cq-a", "cq-b"}[i%2]}}
	wl.Spec.QueueName = "lq"
	wl.Spec.Priority = &prio
	wl.Spec.PodSets = []api.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1")}}}}}}}}
	return wl
}

// churn runs rounds of: submit perRound workloads, schedule, finish
// perRound admitted ones (all, if fewer are), and end (delete, as an expiry does) the finished
// ones. It returns the next workload number.
func churn(tb testing.TB, e *Engine, next, rounds, perRound int, now time.Time) (int, time.Time) {
	tb.Helper()
	for range rounds {
		for range perRound {
			if _, err := e.Submit(churnWorkload(next, int32(next%3)), now); err != nil {
				tb.Fatal(err)
			}
			next++
			now = now.Add(time.Millisecond)
		}
		e.RunToQuiescence(now)
		e.DrainEvictions()
		var admitted []string
		for k, w := range e.workloads {
			if w.Status == Admitted {
				admitted = append(admitted, k)
			}
		}
		slices.Sort(admitted)
		for _, k := range admitted[:min(len(admitted), perRound)] {
			if err := e.Finish(k, now); err != nil {
				tb.Fatal(err)
			}
		}
		e.RunToQuiescence(now)
		e.DrainEvictions()
		for _, k := range sortedKeys(e.workloads) {
			if e.workloads[k].Status == Finished {
				if err := e.Delete(k, now); err != nil {
					tb.Fatal(err)
				}
			}
		}
		now = now.Add(time.Second)
	}
	return next, now
}

// TestEndedWorkloadsLeaveNothing: once every workload has ended (finished
// and deleted or expired, or deleted while pending or admitted), the
// engine holds nothing of any of them — no record, no index entry, no
// queue entry, no usage — however many went through.
func TestEndedWorkloadsLeaveNothing(t *testing.T) {
	e := churnWorld(t, "4")
	e.RecordDecisions()
	_, now := churn(t, e, 0, 30, 20, t0)
	e.DrainDecisions()
	if got := e.footprint(); got.Workloads == 0 {
		t.Fatal("the churn left no live workload: the test would prove nothing")
	}
	for _, k := range sortedKeys(e.workloads) {
		if err := e.Delete(k, now); err != nil {
			t.Fatal(err)
		}
	}
	e.RunToQuiescence(now)
	e.DrainEvictions()
	e.DrainDecisions()
	if got, want := e.footprint(), (footprint{}); got != want {
		t.Errorf("after every workload ended the engine holds %+v, want %+v", got, want)
	}
	for cq, st := range e.usage {
		for fr, v := range st.total {
			if v != 0 {
				t.Errorf("%s: usage of %v is %d after every workload ended, want 0", cq, fr, v)
			}
		}
	}
}

// TestLiveFootprintStaysBounded: over a long churn in which each round's
// finished workloads end, the engine holds only the live ones: its
// footprint after 200 rounds is what it was after 20.
func TestLiveFootprintStaysBounded(t *testing.T) {
	e := churnWorld(t, "8")
	// A backlog first: 26 workloads of 1 cpu on 16 cpu leave 10 waiting.
	next, now := 0, t0
	for ; next < 26; next++ {
		if _, err := e.Submit(churnWorkload(next, 0), now); err != nil {
			t.Fatal(err)
		}
	}
	e.RunToQuiescence(now)
	// Then every round submits 10 and finishes (and ends) 10 admitted:
	// 16 admitted and 10 waiting after each, whatever the round.
	next, now = churn(t, e, next, 20, 10, now)
	early := e.footprint()
	churn(t, e, next, 180, 10, now)
	late := e.footprint()
	for _, f := range []footprint{early, late} {
		if f.Workloads != 26 || f.Pending != 10 || f.Admitted != 16 || f.FinishedQueued != 0 ||
			f.Queued+f.Parked != 10 || f.QueueIndex != f.Queued {
			t.Errorf("footprint %+v, want 26 workloads: 16 admitted, 10 pending (queued or parked), none finished", f)
		}
	}
	if early != late {
		t.Errorf("footprint after 20 rounds %+v, after 200 %+v: want the same", early, late)
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory (make bench-memory) reports the heap an engine holds
// per pending and per admitted workload, then runs a long churn of
// submit, admit, finish and end (expiry) and prints the heap at
// intervals: flat means bounded.
func BenchmarkMemory(b *testing.B) {
	const n = 20_000
	for b.Loop() {
		base := heapInUse()
		e := churnWorld(b, "0")
		for i := range n {
			if _, err := e.Submit(churnWorkload(i, 0), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				b.Fatal(err)
			}
		}
		e.RunToQuiescence(t0.Add(time.Hour))
		perPending := float64(heapInUse()-base) / n
		runtime.KeepAlive(e)

		base = heapInUse()
		e = admittedEngine(b, n)
		perAdmitted := float64(heapInUse()-base) / n
		runtime.KeepAlive(e)
		b.ReportMetric(perPending, "B/pending")
		b.ReportMetric(perAdmitted, "B/admitted")

		// 400 cpu and a backlog of 600: 400 admitted and 200 waiting
		// after every round of 100 submitted and 100 finished.
		e = churnWorld(b, "200")
		next, now := 0, t0
		for ; next < 600; next++ {
			if _, err := e.Submit(churnWorkload(next, int32(next%3)), now); err != nil {
				b.Fatal(err)
			}
		}
		e.RunToQuiescence(now)
		const rounds, perRound, every = 2000, 100, 250
		for r := 0; r < rounds; r += every {
			next, now = churn(b, e, next, every, perRound, now)
			f := e.footprint()
			b.Logf("round %5d: %8d workloads submitted, %5d live (%d admitted), heap %6.2f MiB",
				r+every, next, f.Workloads, f.Admitted, float64(heapInUse())/(1<<20))
		}
	}
}
