package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// churnWorld is Kueue's scheduler-performance shape, scaled down: cohorts
// of ClusterQueues that reclaim within the cohort and preempt lower
// priorities within the queue.
func churnWorld(cohorts, queues int) (string, []string) {
	var b strings.Builder
	b.WriteString("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n")
	var lqs []string
	for c := range cohorts {
		for q := range queues {
			name := fmt.Sprintf("cq-%d-%d", c, q)
			fmt.Fprintf(&b, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  cohort: cohort-%d
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-%s, namespace: ns}
spec: {clusterQueue: %s}
`, name, c, name, name)
			lqs = append(lqs, "lq-"+name)
		}
	}
	return b.String(), lqs
}

// TestPreemptionUnderChurnNeverStalls: workloads of three sizes and
// priorities, each finished a fraction of a second after its admission,
// so that preemptions race finishes all the time. Every workload fits its
// ClusterQueue alone, so every one must be admitted and finished in the
// end; a decider waiting for an eviction that cannot come leaves some
// pending for good. (Issue: admission stopped for good after 3-4 s under
// this shape, with every queue empty.)
func TestPreemptionUnderChurnNeverStalls(t *testing.T) {
	t.Parallel()
	s := start(t)
	world, lqs := churnWorld(2, 3)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(world))

	const total = 400
	classes := []struct {
		cpu, priority int
	}{{1, 50}, {2, 100}, {4, 200}}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))

	finished := s.finishAfterAdmission(rng.Uint64())
	for i := range total {
		c := classes[rng.IntN(len(classes))]
		lq := lqs[rng.IntN(len(lqs))]
		s.must(http.StatusAccepted, "POST", "/v1/workloads", fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload",
			"metadata":{"name":"w-%d","namespace":"ns"},"spec":{"queueName":%q,"priority":%d,"podSets":[{"name":"main","count":1,
			"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, i, lq, c.priority, c.cpu))
		time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
	}
	testenv.Eventually(t, "every workload admitted and finished", 90*time.Second, func() error {
		if n := finished(); n < total {
			var pending []string
			for _, v := range s.workloads() {
				if v.Status != "finished" {
					pending = append(pending, v.Name+":"+v.Status+":"+v.Reason)
				}
			}
			return fmt.Errorf("%d of %d finished; not finished: %v", n, total, pending)
		}
		return nil
	})
	if n := finished(); n != total {
		t.Errorf("%d finished, want %d", n, total)
	}
}

// finishAfterAdmission follows the log and finishes every workload
// 20-200 ms after each of its admissions, as a short job would. It
// returns a count of the finishes accepted.
func (s *system) finishAfterAdmission(seed uint64) func() int {
	t := s.t
	nc, err := bus.Connect(s.nats, "finisher")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		nc.Close()
	})
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectRoot + ".wl.>"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[string]bool{}
	rng := rand.New(rand.NewPCG(seed, 11))
	wg.Go(func() {
		for ctx.Err() == nil {
			msgs, err := bus.Batch(ctx, cons, 256, 200*time.Millisecond)
			if err != nil {
				return
			}
			for _, m := range msgs {
				ev, err := bus.Decode(m)
				if err != nil || ev.Type != events.QuotaReserved {
					continue
				}
				d := ev.Data.(*events.QuotaReservedData)
				delay := time.Duration(20+rng.IntN(180)) * time.Millisecond
				wg.Go(func() {
					select {
					case <-ctx.Done():
						return
					case <-time.After(delay):
					}
					code := s.callQuiet("POST", "/v1/workloads/"+d.Namespace+"/"+d.Name+"/finish", []byte(`{"succeeded":true}`))
					if code == http.StatusAccepted {
						mu.Lock()
						done[d.Name] = true
						mu.Unlock()
					}
				})
			}
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(done)
	}
}

// callQuiet sends a request from a helper goroutine, where a test may not
// fail: it returns the status, or 0 when there was no answer.
func (s *system) callQuiet(method, path string, body []byte) int {
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
