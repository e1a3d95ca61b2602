package eta

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// benchWorld: a cohort of two ClusterQueues of 16 cpu, each fed by two
// LocalQueues whose workloads run 10m, 30m, 60m and 90m on average.
const benchWorld = `
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
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 16}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohort: all
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 16}
`

func benchLQ(name, cq string) string {
	return fmt.Sprintf(`
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: %s, namespace: ns}
spec: {clusterQueue: %s}
`, name, cq)
}

type benchStep struct {
	at     time.Time
	key    string
	finish bool
	wl     *api.Workload
}

type benchSteps []benchStep

func (h benchSteps) Len() int { return len(h) }
func (h benchSteps) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key < h[j].key
}
func (h benchSteps) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *benchSteps) Push(x any)   { *h = append(*h, x.(benchStep)) }
func (h *benchSteps) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// recordRun records n workloads arriving about every 2.4 minutes (the
// cohort about 85% busy), each running an exponentially distributed time
// around its LocalQueue's mean; half carry an expected-runtime annotation
// off by up to 25% either way. It returns the log.
func recordRun(tb testing.TB, n int, seed uint64) *history.Recorder {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rec := history.NewRecorder()
	cfg := benchWorld
	lqs := []struct {
		name, cq string
		mean     time.Duration
	}{{"short", "cq-a", 10 * time.Minute}, {"medium", "cq-a", 30 * time.Minute}, {"long", "cq-b", 60 * time.Minute}, {"longer", "cq-b", 90 * time.Minute}}
	for _, lq := range lqs {
		cfg += benchLQ(lq.name, lq.cq)
	}
	for _, o := range decode(tb, cfg) {
		if err := rec.Apply(o, t0); err != nil {
			tb.Fatal(err)
		}
	}
	runtime := map[string]time.Duration{}
	var q benchSteps
	at := t0
	for i := range n {
		at = at.Add(time.Duration(rng.ExpFloat64() * float64(144*time.Second)))
		lq := lqs[rng.IntN(len(lqs))]
		cpu := 1 + rng.IntN(4)
		run := time.Duration(rng.ExpFloat64()*float64(lq.mean)).Round(time.Second) + time.Minute
		ann := ""
		if rng.IntN(2) == 0 {
			ann = fmt.Sprintf("\n  annotations: {%s: %q}", api.ExpectedRuntimeAnnot,
				(time.Duration(float64(run) * (0.8 + 0.45*rng.Float64()))).Round(time.Second).String())
		}
		name := fmt.Sprintf("w%05d", i)
		doc := fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: %s
  namespace: ns%s
spec:
  queueName: %s
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "%d"}}
`, name, ann, lq.name, cpu)
		runtime["ns/"+name] = run
		heap.Push(&q, benchStep{at: at, key: "ns/" + name, wl: decode(tb, doc)[0].(*api.Workload)})
	}
	for q.Len() > 0 {
		st := heap.Pop(&q).(benchStep)
		if st.finish {
			if err := rec.Finish(st.key, st.at); err != nil {
				tb.Fatal(err)
			}
		} else if err := rec.Submit(st.wl, st.at); err != nil {
			tb.Fatal(err)
		}
		rec.Settle(st.at)
		for _, k := range rec.Admitted {
			heap.Push(&q, benchStep{at: st.at.Add(runtime[k]), key: k, finish: true})
		}
	}
	return rec
}

// BenchmarkETAError records a run (recordRun), then, at the arrival of
// each workload that had to wait (up to benchSamples of them, spread over the run),
// estimates its admission from the log up to that instant and compares
// with when the run admitted it. It reports the median and 90th
// percentile absolute error, in minutes, and how many waits had no
// estimate. Run it with make bench-eta.
func BenchmarkETAError(b *testing.B) {
	rec := recordRun(b, benchRun, 7)
	first := map[string]time.Time{}
	created := map[string]time.Time{}
	for _, r := range rec.Log {
		switch d := r.Event.Data.(type) {
		case *events.QuotaReservedData:
			if _, ok := first[replay.Key(d.WorkloadRef)]; !ok {
				first[replay.Key(d.WorkloadRef)] = r.Event.Time
			}
		case *events.WorkloadSubmittedData:
			created[replay.Key(d.WorkloadRef)] = r.Event.Time
		}
	}
	var waited []string
	for k, c := range created {
		if a, ok := first[k]; ok && a.After(c) {
			waited = append(waited, k)
		}
	}
	slices.Sort(waited)
	if len(waited) > benchSamples {
		step := float64(len(waited)) / float64(benchSamples)
		var pick []string
		for i := range benchSamples {
			pick = append(pick, waited[int(float64(i)*step)])
		}
		waited = pick
	}
	b.ResetTimer()
	for b.Loop() {
		var errs, waits []float64
		none := 0
		for _, k := range waited {
			at := created[k]
			live, err := history.Compact(rec.Log, at)
			if err != nil {
				b.Fatal(err)
			}
			st, err := history.Fold(live, at)
			if err != nil {
				b.Fatal(err)
			}
			res := Estimates(st.Engine, Recorded(rec.Log, at), at)
			e := res.Estimates[k]
			if e == nil || e.At == nil {
				none++
				continue
			}
			errs = append(errs, math.Abs(e.At.Sub(first[k]).Minutes()))
			waits = append(waits, first[k].Sub(at).Minutes())
		}
		b.ReportMetric(float64(len(waited)), "waits")
		b.ReportMetric(float64(none), "no-estimate")
		b.ReportMetric(quantile(waits, 0.5), "median-wait-min")
		b.ReportMetric(quantile(errs, 0.5), "median-abs-err-min")
		b.ReportMetric(quantile(errs, 0.9), "p90-abs-err-min")
	}
}

// quantile is the nearest-rank quantile.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// benchRun and benchSamples size BenchmarkETAError.
var benchRun, benchSamples = 1500, 150
