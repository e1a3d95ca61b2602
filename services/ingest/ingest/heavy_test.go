package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/counterfactual"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
)

// heavyBacklog is how many of team-a's workloads queue one after another
// on a 1-cpu ClusterQueue: the last one's ETA takes heavyBacklog-1 steps
// of simulation.
const heavyBacklog = 8

// heavyWorld is two tenants on ClusterQueues of 1 cpu each, no cohort:
// team-a (alice) with heavyBacklog workloads of 10 minutes each, team-b
// (bob) with two. No admission service runs: the ETA's simulation admits
// a0 and b0 at once, then one workload of each queue per step.
func heavyWorld(t *testing.T, lim HeavyLimits) *guarded {
	t.Helper()
	g := newGuarded(t, false, true)
	g.cfg.Heavy = &lim
	now := time.Now()
	g.cfg.Now = func() time.Time { return now }
	config := teamQueues("", "1")
	if code, _, body := g.call(t, "olga-token", "POST", "/v1/apply", config, "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	submit := func(ns, name string) {
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q,`+
			`"annotations":{"jetqueue.dev/expected-runtime":"10m"}},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,`+
			`"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, ns)
		if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", wl); code != http.StatusAccepted {
			t.Fatalf("submit %s/%s: %d %s", ns, name, code, body)
		}
	}
	for i := range heavyBacklog {
		submit("team-a", fmt.Sprintf("a%d", i))
	}
	submit("team-b", "b0")
	submit("team-b", "b1")
	project(t, g.frontDoor)
	// A minute on: every event is in the past, for ?at=.
	later := now.Add(time.Minute)
	g.cfg.Now = func() time.Time { return later }
	return g
}

// lastOfAlice is the ETA of team-a's last workload: heavyBacklog-1 steps.
var lastOfAlice = fmt.Sprintf("/v1/eta?namespace=team-a&offset=%d&limit=1", heavyBacklog-1)

// heavyAnswer is one request's outcome, sent by callAsync.
type heavyAnswer struct {
	code   int
	header http.Header
	body   string
	err    error
}

// callAsync sends a GET as token on a goroutine of its own, bounded by
// ctx; the answer comes on the channel. A request that never answers
// fails the test after 30 s rather than hanging it: no test here waits
// on purpose.
func (g *guarded) callAsync(ctx context.Context, token, path string) <-chan heavyAnswer {
	out := make(chan heavyAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", g.url+path, nil)
		if err != nil {
			out <- heavyAnswer{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- heavyAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- heavyAnswer{code: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}()
	return out
}

// holdAlice makes every step of alice's computations of kind what wait
// until the returned release is called (or her request ends); entered
// receives once per step that waits.
func holdAlice(g *guarded, what string) (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 64)
	gate := make(chan struct{})
	g.heavy().step = func(ctx context.Context, kind string) {
		if u, _ := auth.UserFrom(ctx); u.Name != "alice" || kind != what {
			return
		}
		in <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	var once sync.Once
	return in, func() { once.Do(func() { close(gate) }) }
}

// mustAnswer waits for an answer and checks its status.
func mustAnswer(t *testing.T, who string, ch <-chan heavyAnswer, want int) heavyAnswer {
	t.Helper()
	a := <-ch
	if a.err != nil {
		t.Fatalf("%s: %v", who, a.err)
	}
	if a.code != want {
		t.Fatalf("%s: %d %s, want %d", who, a.code, a.body, want)
	}
	return a
}

// TestHeavyReadStopsWhenItsClientLeaves: an ETA whose client goes away
// during its simulation takes no further step, and what it simulated is
// kept for the next request (which goes on from there).
func TestHeavyReadStopsWhenItsClientLeaves(t *testing.T) {
	g := heavyWorld(t, HeavyLimits{})
	var mu sync.Mutex
	steps := 0
	left := make(chan struct{})
	cancelled := make(chan struct{})
	g.heavy().step = func(ctx context.Context, what string) {
		if what != "eta" {
			return
		}
		mu.Lock()
		steps++
		n := steps
		mu.Unlock()
		if n == 3 {
			// The client leaves before the third step; the server sees
			// its request's context end.
			close(left)
			<-ctx.Done()
			close(cancelled)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	ans := g.callAsync(ctx, "alice-token", lastOfAlice)
	<-left
	cancel()
	if a := <-ans; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the client's request ended with %+v, want its cancellation", a)
	}
	<-cancelled
	// Wait for the handler to give its seat back: it has returned.
	for {
		h := g.heavy()
		h.mu.Lock()
		n := h.callers["alice"]
		h.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	if steps != 3 {
		t.Errorf("the simulation asked %d times whether to go on, want 3: it went on after its client left", steps)
	}
	mu.Unlock()
	c := g.etaCache()
	if err := c.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	parked := c.last.parked
	c.release()
	if parked == nil || parked.Taken() != 2 {
		t.Fatalf("parked simulation %v, want the one stopped after 2 steps", parked)
	}
	// The next request goes on from the two steps taken.
	g.heavy().step = nil
	code, _, body := g.call(t, "alice-token", "GET", lastOfAlice, "")
	var page struct {
		Steps int `json:"steps"`
		Items []struct {
			Name string
			ETA  struct{ WaitSeconds float64 } `json:"eta"`
		}
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Items) != 1 {
		t.Fatalf("ETA after the client left: %d %s", code, body)
	}
	if w := page.Items[0].ETA.WaitSeconds; w != float64((heavyBacklog-1)*600) {
		t.Errorf("%s waits %vs, want %d", page.Items[0].Name, w, (heavyBacklog-1)*600)
	}
}

// TestSlowETABlocksNoOtherCaller: while alice's ETA is held in the middle
// of its simulation, bob's ETA, explain (with counterfactuals and ETA) and
// list (with ETAs) answer; then alice's does too.
func TestSlowETABlocksNoOtherCaller(t *testing.T) {
	g := heavyWorld(t, HeavyLimits{Global: 4})
	entered, release := holdAlice(g, "eta")
	defer release()
	alice := g.callAsync(t.Context(), "alice-token", lastOfAlice)
	<-entered
	for _, path := range []string{
		"/v1/eta?namespace=team-b",
		"/v1/workloads/team-b/b1/explain?counterfactual=true",
		"/v1/workloads/team-b/b1/explain?eta=true",
		"/v1/workloads?namespace=team-b&eta=true",
		"/v1/workloads?namespace=team-b",
	} {
		a := mustAnswer(t, "bob's "+path, g.callAsync(t.Context(), "bob-token", path), http.StatusOK)
		if !strings.Contains(a.body, `"b1"`) {
			t.Errorf("bob's %s: %s", path, a.body)
		}
	}
	if !strings.Contains(mustAnswer(t, "bob's ETA", g.callAsync(t.Context(), "bob-token", "/v1/eta?namespace=team-b"), http.StatusOK).body,
		`"waitSeconds":600`) {
		t.Errorf("bob's b1 does not wait for b0's 10 minutes")
	}
	release()
	mustAnswer(t, "alice's ETA", alice, http.StatusOK)
}

// TestHeavyReadsAreSharedOut: a caller's third heavy read while two run
// is refused 429 with Retry-After, while another caller is served; with
// every seat of the server taken, a read waits no longer than QueueWait
// and is refused 503 with Retry-After.
func TestHeavyReadsAreSharedOut(t *testing.T) {
	g := heavyWorld(t, HeavyLimits{PerCaller: 2, Global: 3, QueueWait: -1})
	entered, release := holdAlice(g, "eta")
	defer release()
	first := g.callAsync(t.Context(), "alice-token", lastOfAlice)
	second := g.callAsync(t.Context(), "alice-token", "/v1/eta?namespace=team-a")
	<-entered
	<-entered
	a := mustAnswer(t, "alice's third", g.callAsync(t.Context(), "alice-token", "/v1/workloads/team-a/a1/explain?counterfactual=true"), http.StatusTooManyRequests)
	if a.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	mustAnswer(t, "bob's ETA", g.callAsync(t.Context(), "bob-token", "/v1/eta?namespace=team-b"), http.StatusOK)

	// Vera's read holds the last seat (its fold is held too); bob's is
	// refused at once.
	veraIn := make(chan struct{})
	hold := g.heavy().step
	g.heavy().step = func(ctx context.Context, what string) {
		if u, _ := auth.UserFrom(ctx); u.Name == "vera" && what == "eta" {
			close(veraIn)
			<-ctx.Done()
			return
		}
		hold(ctx, what)
	}
	vctx, vcancel := context.WithCancel(t.Context())
	vera := g.callAsync(vctx, "vera-token", "/v1/eta")
	<-veraIn
	b := mustAnswer(t, "bob's ETA with no seat", g.callAsync(t.Context(), "bob-token", "/v1/eta?namespace=team-b"), http.StatusServiceUnavailable)
	if b.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	vcancel()
	<-vera
	release()
	mustAnswer(t, "alice's first", first, http.StatusOK)
	mustAnswer(t, "alice's second", second, http.StatusOK)
}

// TestETAStepBudget: an ETA that needs more steps than its budget answers
// 503 with Retry-After; each retry goes on from where the last stopped,
// until the estimate is reached.
func TestETAStepBudget(t *testing.T) {
	// Two steps over the world's heavyBacklog+2 pending workloads.
	g := heavyWorld(t, HeavyLimits{ETAWork: 2 * (heavyBacklog + 2)})
	refused := 0
	for {
		code, header, body := g.call(t, "alice-token", "GET", lastOfAlice, "")
		if code == http.StatusOK {
			break
		}
		if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(body, "heavy-read-eta-work") {
			t.Fatalf("over budget: %d %v %s, want 503 with Retry-After", code, header, body)
		}
		if refused++; refused > heavyBacklog {
			t.Fatalf("still refused after %d retries: the retries do not go on", refused)
		}
	}
	// heavyBacklog-1 steps, two per request.
	if want := (heavyBacklog - 1) / 2; refused != want {
		t.Errorf("refused %d times, want %d", refused, want)
	}
}

// TestPointInTimeOfNoWorkloadFoldsNothing: explain ?at= of a workload the
// log has no event of answers 404 without reading the log; one that
// exists is folded.
func TestPointInTimeOfNoWorkloadFoldsNothing(t *testing.T) {
	g := heavyWorld(t, HeavyLimits{})
	var mu sync.Mutex
	folds := 0
	g.heavy().step = func(_ context.Context, what string) {
		if what == "fold" {
			mu.Lock()
			folds++
			mu.Unlock()
		}
	}
	at := g.cfg.Now().UTC().Format(time.RFC3339Nano)
	code, _, body := g.call(t, "olga-token", "GET", "/v1/workloads/team-a/nothing/explain?at="+at, "")
	if code != http.StatusNotFound || !strings.Contains(body, "did not exist") {
		t.Fatalf("a workload that never was: %d %s", code, body)
	}
	mu.Lock()
	if folds != 0 {
		t.Errorf("the log was folded (%d questions) for a workload it has no event of", folds)
	}
	mu.Unlock()
	if code, _, body := g.call(t, "olga-token", "GET", "/v1/workloads/team-a/a1/explain?at="+at, ""); code != http.StatusOK {
		t.Fatalf("a workload that was: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if folds == 0 {
		t.Errorf("the hook saw no fold: it counts nothing")
	}
}

// TestPointInTimeCounterfactualsAsTheLog: explain ?at= with
// counterfactuals, whose probes run copies of the folded state, finds the
// changes a search folding the log compacted up to that time finds.
func TestPointInTimeCounterfactualsAsTheLog(t *testing.T) {
	f := newFrontDoor(t)
	log := etaLog(t, 120, 17)
	for _, r := range log {
		if _, _, err := bus.Publish(t.Context(), f.js, r.Event, nil); err != nil {
			t.Fatal(err)
		}
	}
	at := log[len(log)*2/3].Event.Time
	f.cfg.Now = func() time.Time { return log[len(log)-1].Event.Time.Add(time.Minute) }
	st, err := history.Fold(log, at)
	if err != nil {
		t.Fatal(err)
	}
	live, err := history.Compact(log, at)
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for k, w := range st.Engine.Workloads() {
		if w.Status == engine.Pending {
			pending = append(pending, k)
		}
	}
	slices.Sort(pending)
	found := 0
	for _, k := range pending[:min(4, len(pending))] {
		want, err := counterfactual.Search(history.Builder(live, at), k, at)
		if err != nil {
			t.Fatal(err)
		}
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := f.do(t, "GET", "/v1/workloads/"+k+"/explain?counterfactual=true&eta=false&at="+at.Format(time.RFC3339Nano), nil, "")
		if code != http.StatusOK {
			t.Fatalf("explain %s: %d %s", k, code, body)
		}
		var got struct {
			Counterfactuals json.RawMessage `json:"counterfactuals"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		var g bytes.Buffer
		if err := json.Compact(&g, got.Counterfactuals); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w, g.Bytes()) {
			t.Fatalf("%s at %s: counterfactuals\n%s\nwant (compacted log)\n%s", k, at, g.Bytes(), w)
		}
		if len(want.Changes) > 0 {
			found++
		}
	}
	if found < 2 {
		t.Fatalf("%d of %d searches found changes: the log is too easy", found, len(pending))
	}
}

// TestHeavyFlags: the flags set the limits, refuse what is not positive,
// and default to DefaultHeavyLimits.
func TestHeavyFlags(t *testing.T) {
	parse := func(args ...string) (*Config, error) {
		fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c Config
		RegisterFlags(fs, &c)
		return &c, fs.Parse(args)
	}
	c, err := parse()
	if err != nil || *c.Heavy != DefaultHeavyLimits {
		t.Fatalf("defaults: %+v %v", c.Heavy, err)
	}
	c, err = parse("--heavy-reads=3", "--heavy-reads-per-caller=1", "--heavy-read-eta-work=10", "--heavy-read-whatif-steps=7", "--heavy-read-queue-wait=1s",
		"--heavy-read-cpu-share=0.25")
	if want := (HeavyLimits{Global: 3, PerCaller: 1, ETAWork: 10, WhatIfSteps: 7, QueueWait: time.Second, CPUShare: 0.25}); err != nil || *c.Heavy != want {
		t.Fatalf("set: %+v %v, want %+v", c.Heavy, err, want)
	}
	for _, bad := range []string{"--heavy-reads=-1", "--heavy-reads-per-caller=0", "--heavy-read-eta-work=x"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
