package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/retention"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

// system is one running jetqueue: NATS, a database, ingest and the
// deciders (admission, preemptor, podsready); startClient adds the scorer.
type system struct {
	t    testing.TB
	base string
	nats string
	// srv is the embedded NATS server (its message counts).
	srv    *server.Server
	db     string
	stop   []func()
	manual bool
	// latest is the latest time stamped on an event of a workload's
	// history that evictedSince read, and which event that was.
	latest struct {
		at   time.Time
		what string
	}
	// These stop the first instances started.
	stopAdmission, stopPreemptor, stopPodsReady, stopIngest func()
	// shardStops stop the admission shards startShards started.
	shardStops []func()
	// admin is each running service's admin address (/metrics), by the
	// name run was given.
	adminMu sync.Mutex
	admin   map[string]string
	// retention and submit, when set, replace ingest's defaults.
	retention *retention.Options
	submit    *ingest.SubmitLimits
}

var clock0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func start(t testing.TB) *system { return startWith(t, false) }

// startWith starts a system, optionally on the shared manual clock.
func startWith(t testing.TB, manualClock bool) *system {
	t.Helper()
	return startOpts(t, manualClock, nil)
}

// startOpts starts a system, with ingest's retention options if set.
func startOpts(t testing.TB, manualClock bool, ret *retention.Options) *system {
	t.Helper()
	srv := testenv.NATS(t)
	s := &system{t: t, nats: srv.ClientURL(), srv: srv, db: testenv.Postgres(t), manual: manualClock, retention: ret}
	t.Cleanup(s.close)
	s.stopAdmission = s.startAdmission("a")
	s.stopPreemptor = s.startPreemptor("a")
	s.stopPodsReady = s.startPodsReady("a")
	s.stopIngest = s.startIngest()
	return s
}

// startClient starts what `jqctl dev --manual-clock` runs for a plain
// client: every service, the scorer included (its Placed events are in the
// log as they are there), each reading the one shared manual clock, which
// only POST /v1/debug/clock/advance moves.
func startClient(t testing.TB) *system {
	t.Helper()
	s := startWith(t, true)
	s.startScorer("a")
	return s
}

// startScorer starts a scorer instance placing admissions on the nodes of
// the JQ_NODES bucket (none unless a test puts some).
func (s *system) startScorer(instance string) func() {
	return s.run("scorer-"+instance, func(ctx context.Context, rt *service.Runtime) error {
		return scorer.Run(ctx, rt, scorer.Config{NATSURL: s.nats, Instance: instance, Inventory: scorer.InventoryKV})
	})
}

// startIngest starts an ingest instance and points the client at it.
func (s *system) startIngest() func() {
	s.t.Helper()
	addr := make(chan string, 1)
	exited := make(chan error, 1)
	stop := s.run("ingest", func(ctx context.Context, rt *service.Runtime) error {
		err := ingest.Run(ctx, rt, ingest.Config{NATSURL: s.nats, DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0", Auth: auth.Options{Anonymous: true},
			ManualClock: s.manual, Listening: func(a string) { addr <- a }, Retention: s.retention, Submit: s.submit})
		exited <- err
		return err
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case err := <-exited:
		s.t.Fatalf("ingest stopped before serving: %v", err)
	case <-time.After(2 * time.Minute):
		// Leave the next reader something to go on: where everything was.
		buf := make([]byte, 8<<20)
		s.t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		s.t.Fatal("ingest did not start")
	}
	return stop
}

func (s *system) startAdmission(instance string) func() {
	return s.run("admission-"+instance, func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, admission.Config{Member: s.member("admission", instance), ManualClock: s.manual})
	})
}

func (s *system) startPreemptor(instance string) func() {
	return s.run("preemptor-"+instance, func(ctx context.Context, rt *service.Runtime) error {
		return preemptor.Run(ctx, rt, preemptor.Config{Member: s.member("preemptor", instance)})
	})
}

func (s *system) startPodsReady(instance string) func() {
	return s.run("podsready-"+instance, func(ctx context.Context, rt *service.Runtime) error {
		return podsready.Run(ctx, rt, podsready.Config{Member: s.member("podsready", instance), ManualClock: s.manual})
	})
}

// member is a lease-holding service's place on the test bus.
func (s *system) member(service, instance string) bus.Member {
	return bus.Member{NATSURL: s.nats, Shard: service + "-0", Instance: instance, LeaseTTL: 2 * time.Second}
}

// run starts a service through the shared runtime and returns its stop.
func (s *system) run(name string, main service.Main) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.RunContext(ctx, name, service.Options{AdminAddr: "127.0.0.1:0", StopTimeout: 10 * time.Second}, zap.NewNop(),
			func(ctx context.Context, rt *service.Runtime) error {
				s.adminMu.Lock()
				if s.admin == nil {
					s.admin = map[string]string{}
				}
				s.admin[name] = rt.AdminAddr
				s.adminMu.Unlock()
				return main(ctx, rt)
			})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("%s: %v", name, err)
		}
	}
	s.stop = append(s.stop, stop)
	return stop
}

func (s *system) close() {
	for i := len(s.stop) - 1; i >= 0; i-- {
		s.stop[i]()
	}
}

// call sends a request and decodes the JSON answer into out (if non-nil).
func (s *system) call(method, path string, body []byte, out any) int {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// batch names the changes of one scenario step ("" for a single change).
func (s *system) batch(step, n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf("step-%d/%d", step, n)
}

// mustBatch is must with the JQ-Batch header when batch is set.
func (s *system) mustBatch(batch string, want int, method, path string, body []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if batch != "" {
		req.Header.Set("JQ-Batch", batch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		data, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
}

// must is call that fails the test on a status other than want.
func (s *system) must(want int, method, path string, body []byte) {
	s.t.Helper()
	var out json.RawMessage
	if got := s.call(method, path, body, &out); got != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, out)
	}
}

func (s *system) sync() {
	s.t.Helper()
	s.must(http.StatusOK, "GET", "/v1/sync?timeout=30s", nil)
}

type view struct {
	Namespace  string                       `json:"namespace"`
	Name       string                       `json:"name"`
	Status     string                       `json:"status"`
	Assignment map[string]map[string]string `json:"assignment"`
	PodCounts  map[string]int32             `json:"podCounts"`
	Reason     string                       `json:"reason"`
	Evictions  int                          `json:"evictions"`
}

// workloads lists every workload through the paginated query API.
func (s *system) workloads() []view {
	s.t.Helper()
	var all []view
	after := ""
	for {
		var page struct {
			Items []view `json:"items"`
			Next  string `json:"next"`
		}
		if code := s.call("GET", "/v1/workloads?limit=1000&after="+after, nil, &page); code != http.StatusOK {
			s.t.Fatalf("list workloads: %d", code)
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		after = page.Next
	}
}

func list(docs ...[]byte) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"List","items":[%s]}`, strings.Join(stringsOf(docs), ",")))
}

func stringsOf(b [][]byte) []string {
	out := make([]string, len(b))
	for i, d := range b {
		out[i] = string(d)
	}
	return out
}

// evictedSince returns the evictions published after *since (a stream
// sequence) by reason, read from the log (a workload evicted and then
// deleted has no history left to read them from), and moves *since to
// the log's last sequence. It keeps the latest event time it read in the
// workloads' histories in s.latest.
func (s *system) evictedSince(since *uint64) map[string]string {
	s.t.Helper()
	for _, v := range s.workloads() {
		var detail struct {
			Events []struct {
				Seq  uint64    `json:"seq"`
				Type string    `json:"type"`
				Time time.Time `json:"time"`
			} `json:"events"`
		}
		s.call("GET", "/v1/workloads/"+v.Namespace+"/"+v.Name, nil, &detail)
		for _, e := range detail.Events {
			if e.Time.After(s.latest.at) {
				s.latest.at, s.latest.what = e.Time, fmt.Sprintf("%s of %s/%s (#%d)", e.Type, v.Namespace, v.Name, e.Seq)
			}
		}
	}
	out := map[string]string{}
	last := *since
	s.readLog(func(seq uint64, m jetstream.Msg) {
		last = seq
		typ := m.Headers().Get(events.HeaderType)
		if seq <= *since || typ != string(events.Evicted) && typ != string(events.WorkloadSubmitted) {
			return
		}
		ev, err := bus.Decode(m)
		if err != nil {
			s.t.Fatalf("event at sequence %d does not decode: %v", seq, err)
		}
		switch d := ev.Data.(type) {
		case *events.EvictedData:
			out[d.Namespace+"/"+d.Name] = d.Reason
		case *events.WorkloadSubmittedData:
			// Submitted inactive: Kueue's workload controller marks it
			// evicted at once, and so does the projection's status.
			wl, err := api.DecodeStored(d.Workload)
			if err != nil {
				s.t.Fatalf("workload at sequence %d does not decode: %v", seq, err)
			}
			if wl.Spec.Active != nil && !*wl.Spec.Active {
				out[d.Namespace+"/"+d.Name] = engine.EvictedByDeactivation
			}
		}
	})
	*since = last
	return out
}
