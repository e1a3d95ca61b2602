package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/libs/whatif"
)

// cohortOfThree is three ClusterQueues of 4 cpu in one cohort, lending
// what they do not use, without preemption, each with a LocalQueue in its
// own namespace.
func cohortOfThree() string {
	out := "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n"
	for i := range 3 {
		out += fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-%d}
spec:
  cohort: co
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns-%d}
spec: {clusterQueue: cq-%d}
`, i, i, i)
	}
	return out
}

// TestWhatIfReproducesARealTimeHistory records a run in real time and
// replays it with the configuration unchanged: every queue's figures must
// come back exactly, and no workload's admission may move. Three queues
// of a cohort get eight bursts of 15 workloads (1 to 3 cpu, priority 0,
// 10 or 20), each burst submitted at once over HTTP, every workload
// finished 20-200 ms after its admission. The admission service reads
// what arrives together and decides once after it, so the order of
// admission within a burst follows priority across the cohort, not
// arrival; a replay that decided after every event would admit in
// arrival order. The test checks that the history holds such batches.
func TestWhatIfReproducesARealTimeHistory(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(cohortOfThree()))
	s.sync()
	finished := s.finishAfterAdmission(7)
	const rounds, perRound = 8, 15
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range perRound {
			n := r*perRound + i
			wl := fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w%03d","namespace":"ns-%d"},
 "spec":{"queueName":"lq","priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`,
				n, n%3, 10*(n/3%3), 1+n%3)
			wg.Go(func() {
				if code := s.callQuiet("POST", "/v1/workloads", wl); code != http.StatusAccepted {
					t.Errorf("submit w%03d: %d", n, code)
				}
			})
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond)
	}
	testenv.Eventually(t, "every workload finished", time.Minute, func() error {
		if n := finished(); n != rounds*perRound {
			return fmt.Errorf("%d of %d finished", n, rounds*perRound)
		}
		return nil
	})
	s.sync()
	recs := s.records()

	// Batches: runs of the core recorded after more than one arrival
	// or finish since the one before.
	batched, since := 0, 0
	for _, r := range recs {
		switch r.Event.Type {
		case events.WorkloadSubmitted, events.WorkloadFinished:
			since++
		}
		if _, ok := events.DecidedAt(r.Event); ok && r.Event.Type == events.QuotaReserved {
			if since > 1 {
				batched++
			}
			since = 0
		}
	}
	if batched == 0 {
		t.Fatalf("no run of the core decided after more than one event: the history tests no batching")
	}

	from, to := recs[0].Event.Time.Add(-time.Second), recs[len(recs)-1].Event.Time.Add(time.Second)
	rep, err := whatif.Run(recs, whatif.Options{From: from, To: to, Top: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Arrivals != rounds*perRound || len(rep.Queues) != 3 {
		t.Fatalf("%d arrivals in %d queues, want %d in 3", rep.Arrivals, len(rep.Queues), rounds*perRound)
	}
	for _, q := range rep.Queues {
		if q.Old.Admitted != rounds*perRound/3 {
			t.Errorf("%s: %d admitted as recorded, want %d", q.ClusterQueue, q.Old.Admitted, rounds*perRound/3)
		}
		if d := cmp.Diff(q.Old, q.New); d != "" {
			t.Errorf("%s: the unchanged replay differs from the record (-recorded +replayed):\n%s", q.ClusterQueue, d)
		}
	}
	for _, m := range rep.Moved {
		t.Errorf("moved: %s/%s from %v to %v", m.Namespace, m.Name, m.Old, m.New)
	}
	t.Logf("%d events, %d runs of the core after more than one event, %d steps", len(recs), batched, rep.Steps)
}

// TestLoadtestUnderPreemptionCompletes runs `jqctl loadtest --profile
// kueue-baseline` (30 queues in 5 cohorts, preempting within queues and
// reclaiming within cohorts, every workload finished its run time after
// admission) and wants it to finish every workload. Victims finishing
// while their preemption is in flight, and decisions refused because the
// workload moved, are common under this load; admission must neither
// stall on an eviction the preemptor will never publish nor leave work
// pending. It reports how many decisions were refused and how often
// admission replayed the log.
func TestLoadtestUnderPreemptionCompletes(t *testing.T) {
	s := start(t)
	bin := filepath.Join(t.TempDir(), "jqctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/jetqueue/jetqueue/cmd/jqctl")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--server", s.base, "loadtest", "--profile", "kueue-baseline", "--scale", "0.1", "--timeout", "90s")
	cmd.Env = append(os.Environ(), "JQCTL_CONFIG="+filepath.Join(t.TempDir(), "none"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadtest: %v\n%s", err, out)
	}
	fams := s.scrape("admission-a")
	var refused float64
	if f := fams["jetqueue_admission_decisions_refused_total"]; f != nil {
		for _, m := range f.Metric {
			refused += m.GetCounter().GetValue()
		}
	}
	replays, _ := value(fams, "jetqueue_admission_log_replays_total")
	t.Logf("decisions refused: %v; log replays: %v\n%s", refused, replays, out)
}

// records reads the whole log, in order, with each event's sequence.
func (s *system) records() []history.Record {
	s.t.Helper()
	var out []history.Record
	s.readLog(func(seq uint64, m jetstream.Msg) {
		ev, err := bus.Decode(m)
		if err != nil {
			s.t.Fatalf("event at sequence %d: %v", seq, err)
		}
		out = append(out, history.Record{Seq: seq, Event: ev})
	})
	return out
}
