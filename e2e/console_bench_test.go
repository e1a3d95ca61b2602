package e2e

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// consoleBenchWorld: a cohort of two StrictFIFO ClusterQueues of 256 cpu;
// ten namespaces, each with a LocalQueue, ns-0 … ns-4 feeding cq-a and
// ns-5 … ns-9 cq-b.
func consoleBenchWorld() string {
	var b strings.Builder
	b.WriteString("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}\n")
	for _, cq := range []string{"cq-a", "cq-b"} {
		fmt.Fprintf(&b, `---
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
    - name: default
      resources:
      - {name: cpu, nominalQuota: 256}
`, cq)
	}
	for i := range 10 {
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns-%d}\nspec: {clusterQueue: %s}\n",
			i, []string{"cq-a", "cq-b"}[i/5])
	}
	return b.String()
}

type consoleFinish struct {
	at  time.Time
	key string
}

type consoleFinishes []consoleFinish

func (h consoleFinishes) Len() int { return len(h) }
func (h consoleFinishes) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key < h[j].key
}
func (h consoleFinishes) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *consoleFinishes) Push(x any)   { *h = append(*h, x.(consoleFinish)) }
func (h *consoleFinishes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// consoleBenchLog records n workloads (1–8 cpu, annotated 10m–2h) arriving
// evenly over the 8 hours before now, far more than the cohort runs:
// each finishes after its annotated run time, the rest wait. The engine
// decides after each event, as the services would.
func consoleBenchLog(b *testing.B, n int) *history.Recorder {
	rng := rand.New(rand.NewPCG(19, 23))
	start := time.Now().UTC().Add(-8 * time.Hour)
	rec := history.NewRecorder()
	objs, err := api.Decode([]byte(consoleBenchWorld()))
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		api.Default(o)
		if err := rec.Apply(o, start); err != nil {
			b.Fatal(err)
		}
	}
	runtime := map[string]time.Duration{}
	var fin consoleFinishes
	step := 8 * time.Hour / time.Duration(n)
	settle := func(at time.Time) {
		rec.Settle(at)
		for _, k := range rec.Admitted {
			heap.Push(&fin, consoleFinish{at: at.Add(runtime[k]), key: k})
		}
	}
	for i := range n {
		at := start.Add(time.Duration(i+1) * step)
		for fin.Len() > 0 && !fin[0].at.After(at) {
			f := heap.Pop(&fin).(consoleFinish)
			if err := rec.Finish(f.key, f.at); err != nil {
				b.Fatal(err)
			}
			settle(f.at)
		}
		ns := fmt.Sprintf("ns-%d", i%10)
		run := time.Duration(10+rng.IntN(111)) * time.Minute
		doc := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w%06d","namespace":%q,`+
			`"annotations":{%q:%q}},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[`+
			`{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, i, ns, api.ExpectedRuntimeAnnot, run.String(), 1+rng.IntN(8))
		wls, err := api.Decode([]byte(doc))
		if err != nil {
			b.Fatal(err)
		}
		api.Default(wls[0])
		wl := wls[0].(*api.Workload)
		runtime[ns+"/"+wl.Name] = run
		if err := rec.Submit(wl, at); err != nil {
			b.Fatal(err)
		}
		settle(at)
	}
	return rec
}

// consoleCall is one API call of the console, timed.
type consoleCall struct {
	what, path string
}

// BenchmarkConsole100k loads CONSOLE_WORKLOADS (default 100,000)
// workloads into JQ_EVENTS and the projection (a run recorded in process
// over the 8 hours before now, published as is; ingest's projector
// projects it; no decider runs), then
// times the API calls each console view makes for its first render: the
// first call (ingest's caches cold) and the median of three more, with
// the bytes of the answer. With Chromium and playwright-core it then
// times each view's first render in the browser (navigation to content
// in place), listing the calls the page made and their bytes. Run it with
// make bench-console; it is not part of make test.
func BenchmarkConsole100k(b *testing.B) {
	n := 100_000
	if v := os.Getenv("CONSOLE_WORKLOADS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			b.Fatalf("CONSOLE_WORKLOADS=%q: want a count of at least 10", v)
		}
	}
	for b.Loop() {
		t0 := time.Now()
		rec := consoleBenchLog(b, n)
		pending, admitted, finished := 0, 0, 0
		for _, w := range rec.Eng.Workloads() {
			switch w.Status {
			case "pending":
				pending++
			case "admitted":
				admitted++
			case "finished":
				finished++
			}
		}
		say("recorded %d events in process (%s): %d workloads pending, %d admitted, %d finished",
			len(rec.Log), time.Since(t0).Round(time.Millisecond), pending, admitted, finished)

		srv := testenv.NATS(b)
		s := &system{t: b, nats: srv.ClientURL(), db: testenv.Postgres(b)}
		b.Cleanup(s.close)
		s.stopIngest = s.startIngest()
		t0 = time.Now()
		s.withJS(func(_ context.Context, js jetstream.JetStream) {
			var futures []jetstream.PubAckFuture
			for i, r := range rec.Log {
				f, err := bus.PublishAsync(js, r.Event, nil)
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
				if len(futures) == 500 || i == len(rec.Log)-1 {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					for j, f := range futures {
						if _, _, err := bus.Result(ctx, rec.Log[i-len(futures)+1+j].Event, f); err != nil {
							b.Fatal(err)
						}
					}
					cancel()
					futures = futures[:0]
				}
			}
		})
		say("published to JQ_EVENTS in %s", time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		// No decider runs, so /v1/sync would wait for admission: the
		// projection's own progress instead.
		for {
			var p struct{ Seq, StreamSeq uint64 }
			if code := s.call("GET", "/v1/projection/rebuild", nil, &p); code == http.StatusOK && p.Seq >= uint64(len(rec.Log)) {
				break
			} else if time.Since(t0) > 30*time.Minute {
				b.Fatalf("the projection did not catch up: %d %+v", code, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
		say("projected in %s", time.Since(t0).Round(time.Millisecond))

		key := fmt.Sprintf("w%06d", n-7) // pending, in ns-3
		ns := fmt.Sprintf("ns-%d", (n-7)%10)
		calls := []consoleCall{
			{"queues: clusterqueues", "/v1/clusterqueues"},
			{"pending: eta page 1", "/v1/eta?limit=50&offset=0"},
			{"pending: eta page 1000", fmt.Sprintf("/v1/eta?limit=50&offset=%d", 50*999)},
			{"pending: eta cq-b", "/v1/eta?clusterQueue=cq-b&limit=50&offset=0"},
			{"pending: eta ns", "/v1/eta?namespace=" + ns + "&limit=50&offset=0"},
			{"workloads: page 1", "/v1/workloads?limit=50&after="},
			{"workloads: pending in ns", "/v1/workloads?status=pending&namespace=" + ns + "&limit=50&after="},
			{"workload: view", "/v1/workloads/" + ns + "/" + key},
			{"workload: explain+counterfactual", "/v1/workloads/" + ns + "/" + key + "/explain?counterfactual=true"},
		}
		say("%-34s %12s %12s %10s", "console call", "first", "warm median", "bytes")
		for _, c := range calls {
			first, size := timeCall(b, s.base+c.path)
			var warm []time.Duration
			for range 3 {
				d, _ := timeCall(b, s.base+c.path)
				warm = append(warm, d)
			}
			slices.Sort(warm)
			say("%-34s %12s %12s %10d", c.what, first.Round(time.Microsecond), warm[1].Round(time.Microsecond), size)
		}
		// The ETAs stale on the clock: the simulation again, on the
		// replica, reading no event.
		time.Sleep(11 * time.Second)
		stale, _ := timeCall(b, s.base+"/v1/eta?limit=50&offset=0")
		say("%-34s %12s", "pending: eta page 1, stale cache", stale.Round(time.Microsecond))
		static := 0
		for _, f := range []string{"", "app.js", "api.js", "dom.js", "quantity.js", "style.css"} {
			_, size := timeCall(b, s.base+"/ui/"+f)
			static += size
		}
		say("%-34s %12s %12s %10d", "static: /ui/ and its modules", "", "", static)

		browserBench(b, s.base, []string{"#/queues", "#/pending", "#/pending?offset=49950", "#/workloads", "#/workload/" + ns + "/" + key})
	}
}

// say prints a line at once (a benchmark's log is printed only at its
// end, and this one is long).
func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// timeCall GETs url and returns how long the whole answer took and its
// size; anything but 200 fails.
func timeCall(b *testing.B, url string) (time.Duration, int) {
	b.Helper()
	t0 := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, data)
	}
	return d, len(data)
}

// browserBench times each view's first render in headless Chromium
// (console/bench.mjs); without Chromium or playwright-core it says so.
func browserBench(b *testing.B, base string, views []string) {
	script, err := filepath.Abs("console/bench.mjs")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(chromium); err != nil {
		say("no browser figures: %s is missing", chromium)
		return
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "playwright-core")); err != nil {
		say("no browser figures: playwright-core is missing (npm ci --prefix e2e/console)")
		return
	}
	vs, _ := json.Marshal(views)
	cmd := exec.Command("node", script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "JQ_BASE="+base, "JQ_CHROMIUM="+chromium, "JQ_VIEWS="+string(vs))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		b.Fatalf("bench.mjs: %v\n%s%s", err, out.String(), errOut.String())
	}
	say("%-34s %10s %6s  %s", "browser: view", "render", "rows", "API calls (bytes)")
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r struct {
			View  string `json:"view"`
			Ms    int    `json:"ms"`
			Rows  int    `json:"rows"`
			Error string `json:"error"`
			Calls []struct {
				Path  string `json:"path"`
				Bytes int    `json:"bytes"`
			} `json:"calls"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			b.Fatalf("bench.mjs: %s", sc.Bytes())
		}
		if r.Error != "" {
			b.Fatalf("%s: the console shows an error: %s", r.View, r.Error)
		}
		var calls []string
		for _, c := range r.Calls {
			calls = append(calls, fmt.Sprintf("%s (%d)", c.Path, c.Bytes))
		}
		say("%-34s %8dms %6d  %s", r.View, r.Ms, r.Rows, strings.Join(calls, ", "))
	}
}
