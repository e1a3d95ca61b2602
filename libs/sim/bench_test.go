package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
)

// bigScenario is the shape of ../shared/difftest/big-scenario.py, the load
// `make bench-vs-kueue` times against Kueue: 10 cohorts of 5 ClusterQueues,
// two flavors of cpu and memory sized for half the demand, n workloads of
// mixed sizes and priorities submitted in waves a second apart, an empty
// expect after each wave. It is built in memory, so the benchmark times the
// run alone, not the parse.
func bigScenario(n, waves int, preemption bool, seed uint64) *Scenario {
	const cohorts, cqs = 10, 5
	rng := rand.New(rand.NewPCG(seed, seed))
	sc := &Scenario{Name: "big"}
	flavors := []string{"on-demand", "spot"}
	for _, f := range flavors {
		sc.Objects = append(sc.Objects, &api.ResourceFlavor{TypeMeta: metav1.TypeMeta{Kind: api.KindResourceFlavor},
			ObjectMeta: metav1.ObjectMeta{Name: f}})
	}
	q := max(1, int(float64(n)/float64(cohorts*cqs)*3*0.5/2))
	for c := range cohorts {
		for i := range cqs {
			cq := &api.ClusterQueue{TypeMeta: metav1.TypeMeta{Kind: api.KindClusterQueue},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cq-%d-%d", c, i)}}
			cq.Spec.Cohort = fmt.Sprintf("cohort-%d", c)
			cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
			cq.Spec.QueueingStrategy = api.BestEffortFIFO
			rg := api.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}}
			for _, f := range flavors {
				rg.Flavors = append(rg.Flavors, api.FlavorQuotas{Name: f, Resources: []api.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(fmt.Sprint(q))},
					{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse(fmt.Sprintf("%dGi", 4*q))},
				}})
			}
			cq.Spec.ResourceGroups = []api.ResourceGroup{rg}
			if preemption {
				cq.Spec.Preemption = &api.ClusterQueuePreemption{WithinClusterQueue: api.PreemptionLowerPriority,
					ReclaimWithinCohort: api.PreemptionLowerPriority}
			}
			sc.Objects = append(sc.Objects, cq, &api.LocalQueue{TypeMeta: metav1.TypeMeta{Kind: api.KindLocalQueue},
				ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: fmt.Sprintf("ns-%d-%d", c, i)},
				Spec:       api.LocalQueueSpec{ClusterQueue: cq.Name}})
		}
	}
	sizes, prios := []int{1, 1, 2, 3, 4, 8}, []int32{0, 0, 50, 100, 200}
	second := time.Second
	for w := range waves {
		var batch []api.Object
		for range n / waves {
			cpu := sizes[rng.IntN(len(sizes))]
			prio := prios[rng.IntN(len(prios))]
			wl := &api.Workload{TypeMeta: metav1.TypeMeta{Kind: api.KindWorkload},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", len(batch)+w*(n/waves)),
					Namespace: fmt.Sprintf("ns-%d-%d", rng.IntN(cohorts), rng.IntN(cqs))}}
			wl.Spec.QueueName = "lq"
			wl.Spec.Priority = &prio
			wl.Spec.PodSets = []api.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(cpu)),
					corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 2*cpu))}}}}}}}}
			batch = append(batch, wl)
		}
		sc.Steps = append(sc.Steps, Step{Submit: batch}, Step{Expect: &Expect{}})
		if w < waves-1 {
			sc.Steps = append(sc.Steps, Step{Advance: &second})
		}
	}
	return sc
}

// cpuTime is the process's CPU time (user+sys): the machine may be shared.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunBig runs the big-scenario load of `make bench-vs-kueue`
// (20,000 workloads in 3 waves, without and with preemption) and reports
// the run's CPU time: the decision core's share of `jqctl simulate`, which
// the Kueue comparison also prints as jqctl_run.
func BenchmarkRunBig(b *testing.B) {
	for _, preemption := range []bool{false, true} {
		b.Run(fmt.Sprintf("workloads=20000/waves=3/preemption=%v", preemption), func(b *testing.B) {
			var cpu time.Duration
			var admitted int
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				sc := bigScenario(20_000, 3, preemption, 7)
				start := cpuTime(b)
				b.StartTimer()
				res, err := Run(sc)
				b.StopTimer()
				cpu += cpuTime(b) - start
				if err != nil {
					b.Fatal(err)
				}
				admitted = len(res.Checkpoints[len(res.Checkpoints)-1].Admitted)
				b.StartTimer()
			}
			if admitted == 0 {
				b.Fatal("nothing admitted")
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(admitted), "admitted")
		})
	}
}

// BenchmarkRunFile runs the scenario named by $JQ_BENCH_SCENARIO (for
// instance big-scenario.py's output) and times only the run, not the
// parse: for profiling the core on a given file with -cpuprofile.
func BenchmarkRunFile(b *testing.B) {
	path := os.Getenv("JQ_BENCH_SCENARIO")
	if path == "" {
		b.Skip("JQ_BENCH_SCENARIO is not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sc, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := Run(sc); err != nil {
			b.Fatal(err)
		}
	}
}
