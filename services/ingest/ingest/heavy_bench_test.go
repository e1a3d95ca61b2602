package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// BenchmarkQuietTenantBesideNoisy: bob's ETA and counterfactual explain
// (one workload of his own queue) alone, then while alice, with
// HEAVY_BACKLOG (default 2000) workloads pending in her own queue, asks
// for the ETAs of her backlog's last page and counterfactuals of its last
// workload as fast as she is answered (waiting Retry-After when refused,
// as jqctl does), from HEAVY_NOISY (default 4) clients. Both figures come from one run, under the default limits
// (heavy.go). Run with
//
//	cd services/ingest && go test -run='^$' -bench=QuietTenantBesideNoisy -benchtime=1x ./ingest
func BenchmarkQuietTenantBesideNoisy(b *testing.B) {
	backlog := envInt("HEAVY_BACKLOG", 2000)
	noisy := envInt("HEAVY_NOISY", 4)
	g := noisyWorld(b, backlog)
	quiet := []string{"/v1/eta?namespace=team-b", "/v1/workloads/team-b/b1/explain?counterfactual=true"}
	measure := func(rounds int) map[string][]time.Duration {
		out := map[string][]time.Duration{}
		for range rounds {
			for _, path := range quiet {
				start := time.Now()
				code, body := g.callCtx(b.Context(), "bob-token", path)
				if code != http.StatusOK {
					b.Fatalf("bob's %s: %d %s", path, code, body)
				}
				out[path] = append(out[path], time.Since(start))
			}
		}
		return out
	}
	if n := envInt("HEAVY_ETA_WORK", 0); n > 0 {
		g.cfg.Heavy = &HeavyLimits{ETAWork: n}
	}
	// Warm: the replica's first catch-up reads the whole log.
	measure(1)
	// What alice asks costs, alone: as many steps as her backlog.
	last := fmt.Sprintf("/v1/eta?namespace=team-a&offset=%d&limit=100", max(0, backlog-100))
	for _, path := range []string{last, fmt.Sprintf("/v1/workloads/team-a/a%d/explain?counterfactual=true&eta=false", backlog-1)} {
		start := time.Now()
		code, body := g.callCtx(b.Context(), "alice-token", path)
		var page struct {
			Steps           int `json:"steps"`
			Counterfactuals struct {
				Probes int `json:"probes"`
			} `json:"counterfactuals"`
		}
		_ = json.Unmarshal([]byte(body), &page)
		b.Logf("alice %-55s alone: %d in %7.1f ms (%d ETA steps, %d probes)", path, code, ms(time.Since(start)), page.Steps, page.Counterfactuals.Probes)
	}
	for b.Loop() {
		alone := measure(5)
		ctx, cancel := context.WithCancel(b.Context())
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for i := range noisy {
			wg.Go(func() {
				path := last
				if i%2 == 1 {
					path = fmt.Sprintf("/v1/workloads/team-a/a%d/explain?counterfactual=true", backlog-1)
				}
				for ctx.Err() == nil {
					code, _ := g.callCtx(ctx, "alice-token", path)
					mu.Lock()
					codes[code]++
					mu.Unlock()
					if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
						// As jqctl does: never sooner than Retry-After.
						select {
						case <-ctx.Done():
						case <-time.After(time.Second):
						}
					}
				}
			})
		}
		// Let the noise start.
		time.Sleep(500 * time.Millisecond)
		beside := measure(5)
		cancel()
		wg.Wait()
		for _, path := range quiet {
			a, n := alone[path], beside[path]
			b.Logf("bob %-55s alone p50 %7.1f ms max %7.1f ms | beside alice p50 %7.1f ms max %7.1f ms",
				path, ms(quantileD(a, 0.5)), ms(slices.Max(a)), ms(quantileD(n, 0.5)), ms(slices.Max(n)))
			name := map[bool]string{true: "eta", false: "explain"}[strings.HasPrefix(path, "/v1/eta")]
			b.ReportMetric(ms(quantileD(a, 0.5)), name+"-alone-p50-ms")
			b.ReportMetric(ms(quantileD(n, 0.5)), name+"-beside-noisy-p50-ms")
		}
		b.Logf("alice's answers by status while bob was measured: %v", codes)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func quantileD(v []time.Duration, q float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// noisyWorld is heavyWorld's two tenants, with backlog workloads of
// alice's, recorded as the deciders would have written them (admission's
// decisions included) and published straight to JQ_EVENTS.
func noisyWorld(b *testing.B, backlog int) *benchDoor {
	b.Helper()
	g := newBenchDoor(b)
	config := teamQueues("", "4")
	objs, err := api.Decode([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	rec := history.NewRecorder()
	at := time.Now().Add(-time.Hour).UTC()
	for _, o := range objs {
		api.Default(o)
		if err := rec.Apply(o, at); err != nil {
			b.Fatal(err)
		}
	}
	submit := func(ns, name string, cpu int) {
		at = at.Add(time.Millisecond)
		doc := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q,`+
			`"annotations":{"jetqueue.dev/expected-runtime":"%dm"}},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,`+
			`"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, name, ns, 5+len(name)%20, cpu)
		wls, err := api.Decode([]byte(doc))
		if err != nil {
			b.Fatal(err)
		}
		api.Default(wls[0])
		if err := rec.Submit(wls[0].(*api.Workload), at); err != nil {
			b.Fatal(err)
		}
		rec.Settle(at)
	}
	for i := range backlog {
		submit("team-a", fmt.Sprintf("a%d", i), 1+i%2)
	}
	submit("team-b", "b0", 4)
	submit("team-b", "b1", 4)
	for _, r := range rec.Log {
		if _, _, err := bus.Publish(b.Context(), g.js, r.Event, nil); err != nil {
			b.Fatal(err)
		}
	}
	return g
}

// benchDoor is newGuarded's server for a benchmark: the shipped policy and
// the access tests' users, over HTTP.
type benchDoor struct {
	*Server
	url string
}

func newBenchDoor(tb testing.TB) *benchDoor {
	tb.Helper()
	ctx := tb.Context()
	conn, err := bus.Open(ctx, testenv.NATS(tb).ClientURL(), "bench", bus.StreamOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	st, err := store.Open(ctx, testenv.Postgres(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	dir := tb.TempDir()
	opts := auth.Options{TokenAuthFile: filepath.Join(dir, "tokens.csv"), AuthorizationPolicyFile: filepath.Join(dir, "policy.yaml")}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "policy.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(opts.TokenAuthFile, []byte(accessTokens), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(opts.AuthorizationPolicyFile, shipped, 0o600); err != nil {
		tb.Fatal(err)
	}
	guard, err := NewGuard(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{cfg: Config{Now: time.Now, MaxBody: 1 << 20}, log: zap.NewNop(), js: conn.JS, stream: conn.Stream,
		store: st, rebuild: make(chan chan error), guard: guard}
	srv := httptest.NewServer(s.authenticate(s.routes()))
	tb.Cleanup(srv.Close)
	return &benchDoor{Server: s, url: srv.URL}
}

// callCtx sends a GET as token; a request cut short by ctx is status 0.
func (g *benchDoor) callCtx(ctx context.Context, token, path string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, "GET", g.url+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
