package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/retention"
)

// subjectKinds counts JQ_EVENTS' messages by the kind of their subject
// (wl, placed, cfg, batch).
func (s *system) subjectKinds() map[string]uint64 {
	s.t.Helper()
	out := map[string]uint64{}
	s.withJS(func(ctx context.Context, js jetstream.JetStream) {
		st, err := js.Stream(ctx, events.Stream)
		if err != nil {
			s.t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(events.SubjectRoot+".>"))
		if err != nil {
			s.t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			kind := strings.Split(subj, ".")[2]
			out[kind] += n
		}
	})
	return out
}

// BenchmarkMemoryServices (make bench-memory) runs the whole system in
// one process — embedded NATS, ingest, admission, preemptor, podsready —
// with retention at its most aggressive and the deciders' snapshots kept
// at the log's end (standing in for the snapshot writer), through rounds
// of: submit 100 workloads of 1 cpu (one request), finish the 100 oldest
// admitted, on 300 cpu with a standing backlog, so 300 are admitted and
// 100 wait after every round. Every 10 rounds it prints the heap after a
// collection, JQ_EVENTS' size and the projection's rows: flat = bounded.
// MEMORY_ROUNDS sets the rounds (default 60); MEMORY_HEAPPROFILE, a file
// to write the heap profile to at the end.
func BenchmarkMemoryServices(b *testing.B) {
	rounds := 60
	if v, err := strconv.Atoi(os.Getenv("MEMORY_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	snapshots := []string{"admission-0", "podsready-0"}
	for b.Loop() {
		s := startOpts(b, false, &retention.Options{Retention: time.Millisecond, HistoryRetention: time.Millisecond,
			Interval: 100 * time.Millisecond, Snapshots: snapshots, BatchSettle: time.Millisecond})
		s.must(http.StatusOK, "POST", "/v1/apply", []byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "300"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
`))
		next := 0
		submit := func(n int) {
			docs := make([][]byte, n)
			for i := range docs {
				docs[i] = oneCPU(fmt.Sprintf("m%07d", next))
				next++
			}
			s.must(http.StatusAccepted, "POST", "/v1/workloads", list(docs...))
		}
		submit(400)
		s.sync()
		began := time.Now()
		for r := 1; r <= rounds; r++ {
			submit(100)
			s.sync()
			var page struct {
				Items []view `json:"items"`
			}
			s.call("GET", "/v1/workloads?status=admitted&limit=100", nil, &page)
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for _, v := range page.Items {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					s.callQuiet("POST", "/v1/workloads/team/"+v.Name+"/finish", nil)
				}()
			}
			wg.Wait()
			s.sync()
			if r%10 != 0 {
				continue
			}
			s.putSnapshots(snapshots, s.streamState().LastSeq)
			// Let the passes expire and purge what may go, until the log
			// stops shrinking.
			for prev := uint64(0); ; {
				time.Sleep(500 * time.Millisecond)
				n := s.streamState().Msgs
				if n == prev {
					break
				}
				prev = n
			}
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			st := s.streamState()
			var counts struct {
				Admitted, Pending int
			}
			var pg struct {
				Items []view `json:"items"`
			}
			s.call("GET", "/v1/workloads?status=admitted&limit=1000", nil, &pg)
			counts.Admitted = len(pg.Items)
			s.call("GET", "/v1/workloads?status=pending&limit=1000", nil, &pg)
			counts.Pending = len(pg.Items)
			b.Logf("%5.0fs round %4d: %6d submitted, %d admitted, %d pending; heap %6.1f MiB; JQ_EVENTS %6d msgs %6.2f MiB %v",
				time.Since(began).Seconds(), r, next, counts.Admitted, counts.Pending, float64(m.HeapAlloc)/(1<<20), st.Msgs, float64(st.Bytes)/(1<<20), s.subjectKinds())
		}
		if path := os.Getenv("MEMORY_HEAPPROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		s.close()
	}
}
