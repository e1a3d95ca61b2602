package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// loadedEngine builds the benchmark world: cqs ClusterQueues in cohorts of
// cqs/cohorts, two flavors each (on-demand then spot), and n pending
// workloads with mixed sizes and priorities, spread over the queues.
func loadedEngine(tb testing.TB, cqs, cohorts, n int, seed uint64) *Engine {
	tb.Helper()
	e := New()
	must := func(_ Action, err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	for _, f := range []string{"on-demand", "spot"} {
		must(e.Apply(&api.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: f}}, t0))
	}
	for i := range cqs {
		cq := &api.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cq-%d", i)}}
		cq.Spec.Cohort = fmt.Sprintf("cohort-%d", i%cohorts)
		cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
		cq.Spec.QueueingStrategy = api.BestEffortFIFO
		rg := api.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}}
		for _, f := range []string{"on-demand", "spot"} {
			bl := resource.MustParse("20")
			rg.Flavors = append(rg.Flavors, api.FlavorQuotas{Name: f, Resources: []api.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("40"), BorrowingLimit: &bl},
				{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("160Gi")},
			}})
		}
		cq.Spec.ResourceGroups = []api.ResourceGroup{rg}
		must(e.Apply(cq, t0))
		must(e.Apply(&api.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: fmt.Sprintf("ns-%d", i)},
			Spec: api.LocalQueueSpec{ClusterQueue: cq.Name}}, t0))
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range n {
		cpu := resource.MustParse(fmt.Sprintf("%d", 1+rng.IntN(4)))
		prio := int32(rng.IntN(4) * 100)
		wl := &api.Workload{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wl-%d", i), Namespace: fmt.Sprintf("ns-%d", rng.IntN(cqs))}}
		wl.Spec.QueueName = "lq"
		wl.Spec.Priority = &prio
		wl.Spec.PodSets = []api.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("2Gi")}}}}}}}}
		if _, err := e.Submit(wl, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

// BenchmarkScheduleToQuiescence schedules 10,000 pending workloads across
// 50 ClusterQueues in 10 cohorts with 2 flavors and mixed priorities.
func BenchmarkScheduleToQuiescence(b *testing.B) {
	var admissions, cycles int
	var mallocs uint64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		e := loadedEngine(b, 50, 10, 10_000, 1)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		b.StartTimer()
		cycles += e.RunToQuiescence(t0)
		b.StopTimer()
		elapsed += time.Since(start)
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		for _, w := range e.Workloads() {
			if w.Status == Admitted {
				admissions++
			}
		}
		b.StartTimer()
	}
	if admissions == 0 {
		b.Fatal("nothing admitted")
	}
	b.ReportMetric(float64(admissions)/elapsed.Seconds(), "admissions/s")
	b.ReportMetric(float64(mallocs)/float64(admissions), "allocs/admission")
	b.ReportMetric(float64(admissions)/float64(b.N), "admitted/run")
	b.ReportMetric(float64(cycles)/float64(b.N), "cycles/run")
}

// BenchmarkSnapshotDecode restores an engine of 250,000 finished
// workloads and 1,000 pending (about a day at 3 jobs/s) from its snapshot,
// as admission does on start.
func BenchmarkSnapshotDecode(b *testing.B) {
	e := loadedEngine(b, 10, 2, 251_000, 1)
	n := 0
	for _, k := range sortedKeys(e.Workloads()) {
		if n == 250_000 {
			break
		}
		if err := e.Finish(k, t0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	snap, err := e.EncodeSnapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(snap))/(1<<20), "MiB")
	for b.Loop() {
		if _, err := DecodeSnapshot(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// admittedEngine is an engine of n admitted workloads: admission's state
// after n/1,000 s at 1,000/s of make bench-latency.
func admittedEngine(b *testing.B, n int) *Engine {
	e := churnWorld(b, fmt.Sprint(n))
	for i := range n {
		if _, err := e.Submit(churnWorkload(i, 0), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
	e.RunToQuiescence(t0.Add(time.Hour))
	if got := e.footprint().Admitted; got != n {
		b.Fatalf("%d admitted, want %d", got, n)
	}
	return e
}

// BenchmarkSnapshotEncode encodes an engine of 50,000 admitted
// workloads, as a snapshot's compaction does.
func BenchmarkSnapshotEncode(b *testing.B) {
	e := admittedEngine(b, 50_000)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		snap, err := e.EncodeSnapshot()
		if err != nil {
			b.Fatal(err)
		}
		size = len(snap)
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// BenchmarkSnapshotDecodeAdmitted restores that engine, as a
// compaction's private copy and a restart do.
func BenchmarkSnapshotDecodeAdmitted(b *testing.B) {
	snap, err := admittedEngine(b, 50_000).EncodeSnapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSnapshot(snap); err != nil {
			b.Fatal(err)
		}
	}
}
