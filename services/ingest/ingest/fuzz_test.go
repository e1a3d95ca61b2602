package ingest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// fuzzRoutes are the writing endpoints a client sends bodies to; the
// fuzzer picks one per input.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/apply"},
	{"POST", "/v1/workloads"},
	{"POST", "/v1/workloads/team/fuzzed/finish"},
	{"POST", "/v1/workloads/team/fuzzed/priority"},
	{"POST", "/v1/workloads/team/fuzzed/podsready"},
	{"DELETE", "/v1/workloads/team/fuzzed"},
}

// FuzzHandlers sends random bodies to the HTTP API on a real JetStream and
// PostgreSQL (one server for the whole run): whatever the body, the
// answer is never a 5xx, the handler never panics, and every 2xx answer
// is JSON.
func FuzzHandlers(f *testing.F) {
	h := fuzzServer(f)
	world := `{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}},
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"10"}]}]}]}},
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"team"},"spec":{"clusterQueue":"cq"}}]}`
	workload := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"fuzzed","namespace":"team"},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
	// The workload the actions name exists, so they get past the 404.
	for _, seed := range []struct {
		route int
		body  string
	}{{0, world}, {1, workload}} {
		if code, body := serve(f, h, seed.route, []byte(seed.body)); code >= 300 {
			f.Fatalf("seeding %s: %d %s", fuzzRoutes[seed.route].path, code, body)
		}
	}
	f.Add(uint8(0), []byte(world))
	f.Add(uint8(1), []byte(workload))
	f.Add(uint8(1), []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team","labels":{"kueue.x-k8s.io/queue-name":"lq"}},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`))
	f.Add(uint8(1), []byte(`{"kind":"Workload","spec":{"podSets":[{"count":2147483647}]}}`))
	f.Add(uint8(2), []byte(`{"succeeded":false}`))
	f.Add(uint8(3), []byte(`{"priority":2147483647}`))
	f.Add(uint8(4), []byte(``))
	f.Add(uint8(5), []byte(`null`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		code, answer := serve(t, h, int(route)%len(fuzzRoutes), body)
		if code >= 500 {
			t.Fatalf("%d %s", code, answer)
		}
		if code >= 200 && code < 300 && !json.Valid(answer) {
			t.Fatalf("%d answer is not JSON: %q", code, answer)
		}
	})
}

// serve sends one request straight to the handler, so that a panic in it
// fails the fuzz target rather than being recovered by net/http.
func serve(tb testing.TB, h http.Handler, route int, body []byte) (int, []byte) {
	tb.Helper()
	r := fuzzRoutes[route]
	req := httptest.NewRequestWithContext(tb.Context(), r.method, r.path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// fuzzServer is an ingest Server on a real JetStream and PostgreSQL, as
// the front door tests build it, without the projector or deciders.
func fuzzServer(tb testing.TB) http.Handler {
	tb.Helper()
	ctx := tb.Context()
	conn, err := bus.Open(ctx, testenv.NATS(tb).ClientURL(), "fuzz", bus.StreamOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	st, err := store.Open(ctx, testenv.Postgres(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	s := &Server{cfg: Config{Now: time.Now, MaxBody: 1 << 20}, log: zap.NewNop(), js: conn.JS, stream: conn.Stream,
		store: st, rebuild: make(chan chan error), guard: &Guard{Anonymous: true}}
	return s.routes()
}
