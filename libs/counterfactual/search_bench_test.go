package counterfactual

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/history"
)

// BenchmarkSearch times one counterfactual search over a state of
// JQ_SEARCH_WORKLOADS workloads (default 100,000): a cohort of two
// StrictFIFO ClusterQueues of 256 cpu, ten LocalQueues, workloads of 1–8
// cpu; what fits is admitted, the rest wait. The workload searched is the
// last submitted. Its copies come from an eta.Replica, as ingest's do.
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if v := os.Getenv("JQ_SEARCH_WORKLOADS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	rep := eta.NewReplica()
	rec := history.NewRecorder()
	at := t0
	config := rf
	for _, q := range []string{"cq-a", "cq-b"} {
		config += fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  cohort: all
  queueingStrategy: StrictFIFO
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources:
      - {name: cpu, nominalQuota: 256}
`, q)
	}
	for i := range 10 {
		config += fmt.Sprintf("---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns-%d}\nspec: {clusterQueue: %s}\n",
			i, []string{"cq-a", "cq-b"}[i/5])
	}
	objs, err := api.Decode([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		api.Default(o)
		if err := rec.Apply(o, at); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(19, 23))
	var key string
	for i := range n {
		at = at.Add(time.Millisecond)
		ns := fmt.Sprintf("ns-%d", i%10)
		objs, err := api.Decode([]byte(wl(ns, fmt.Sprintf("w%06d", i), strconv.Itoa(1+rng.IntN(8)), 0)))
		if err != nil {
			b.Fatal(err)
		}
		api.Default(objs[0])
		if err := rec.Submit(objs[0].(*api.Workload), at); err != nil {
			b.Fatal(err)
		}
		rec.Settle(at)
		key = ns + "/" + objs[0].(*api.Workload).Name
	}
	for _, r := range rec.Log {
		rep.Apply(r)
	}
	build, err := rep.Builder()
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	for range 3 {
		if _, err := build(); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("a copy of %d workloads: %v", n, time.Since(t1)/3)
	b.ResetTimer()
	var res Result
	for b.Loop() {
		if res, err = Search(build, key, at.Add(time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Probes), "probes")
	b.ReportMetric(float64(len(res.Changes)), "changes")
}
