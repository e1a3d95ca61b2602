package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// frontDoor is an ingest Server on a real JetStream and a real PostgreSQL,
// without the projector or the deciders: what the HTTP API itself does.
type frontDoor struct {
	*Server
	h    http.Handler
	logs *observer.ObservedLogs
	db   string
}

func newFrontDoor(t *testing.T) *frontDoor {
	t.Helper()
	ctx := t.Context()
	conn, err := bus.Open(ctx, testenv.NATS(t).ClientURL(), t.Name(), bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	db := testenv.Postgres(t)
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	core, logs := observer.New(zap.InfoLevel)
	s := &Server{cfg: Config{Now: time.Now, MaxBody: 1 << 20}, log: zap.New(core), js: conn.JS, stream: conn.Stream,
		store: st, rebuild: make(chan chan error), guard: &Guard{Anonymous: true}}
	return &frontDoor{Server: s, h: s.routes(), logs: logs, db: db}
}

// do serves one request and returns the status, the headers and the body.
func (f *frontDoor) do(t *testing.T, method, path string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

func (f *frontDoor) messages(t *testing.T) uint64 {
	t.Helper()
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func (f *frontDoor) has(t *testing.T, subject string) bool {
	t.Helper()
	_, err := f.stream.GetLastMsgForSubject(t.Context(), subject)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// fieldOf returns the field of the single error in an error body.
func fieldOf(t *testing.T, body []byte) string {
	t.Helper()
	var out errorBody
	if err := json.Unmarshal(body, &out); err != nil || len(out.Errors) != 1 {
		t.Fatalf("want one error, got %s (%v)", body, err)
	}
	return out.Errors[0].Field
}

const cqA = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf-a"}}`

func cq(quota string) string {
	return `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq-b"},"spec":{"namespaceSelector":{},` +
		`"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf-a","resources":[{"name":"cpu","nominalQuota":"` + quota + `"}]}]}]}}`
}

func list(docs ...string) string {
	return `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(docs, ",") + `]}`
}

// movingStream moves one subject (another writer's change) right after
// ingest has read its position, as a concurrent writer can.
type movingStream struct {
	jetstream.Stream
	subject string
	move    func()
}

func (m movingStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	msg, err := m.Stream.GetLastMsgForSubject(ctx, subject)
	if subject == m.subject {
		m.move()
	}
	return msg, err
}

// TestApplyIsAllOrNothing: when the second document's object changes
// after ingest read it, the apply answers 409 and nothing of it is in the
// stream, not even the first document; applied again, both are.
func TestApplyIsAllOrNothing(t *testing.T) {
	f := newFrontDoor(t)
	if code, _, body := f.do(t, "POST", "/v1/apply", nil, cq("4")); code != http.StatusOK {
		t.Fatalf("apply cq-b: %d %s", code, body)
	}
	cqSubject := events.ConfigSubject("ClusterQueue", "", "cq-b")
	real := f.stream
	f.stream = movingStream{Stream: real, subject: cqSubject, move: func() {
		ev := f.event(events.ConfigDeleted, cqSubject, &events.ConfigRef{Kind: "ClusterQueue", Name: "cq-b"})
		if _, _, err := bus.Publish(context.Background(), f.js, ev, nil); err != nil {
			t.Error(err)
		}
	}}
	code, _, body := f.do(t, "POST", "/v1/apply", nil, list(cqA, cq("8")))
	if code != http.StatusConflict {
		t.Fatalf("apply with a conflict midway: %d %s, want 409", code, body)
	}
	if f.has(t, events.ConfigSubject("ResourceFlavor", "", "rf-a")) {
		t.Fatal("the first document of a refused apply is in the stream")
	}
	if n := f.messages(t); n != 2 {
		t.Fatalf("stream holds %d events, want 2 (cq-b and the concurrent deletion)", n)
	}
	f.stream = real
	if code, _, body := f.do(t, "POST", "/v1/apply", nil, list(cqA, cq("8"))); code != http.StatusOK {
		t.Fatalf("apply again: %d %s", code, body)
	}
	if n := f.messages(t); n != 4 {
		t.Errorf("stream holds %d events, want 4", n)
	}
}

// TestApplyRefusesAnObjectTwice: the same object twice in one apply is a
// 400 naming it, and nothing is applied.
func TestApplyRefusesAnObjectTwice(t *testing.T) {
	f := newFrontDoor(t)
	code, _, body := f.do(t, "POST", "/v1/apply", nil, list(cqA, cq("4"), cq("5")))
	if code != http.StatusBadRequest || fieldOf(t, body) != "metadata.name" {
		t.Fatalf("%d %s, want 400 on metadata.name", code, body)
	}
	if n := f.messages(t); n != 0 {
		t.Errorf("stream holds %d events, want 0", n)
	}
}

func workload(name, cpu string) string {
	return `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"` + name + `","namespace":"ns"},` +
		`"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"` + cpu + `"}}}]}}}]}}`
}

type answerBody struct {
	Namespace, Name, UID string
	Seq                  uint64
}

// TestIdempotencyKeyIsKeyedToTheBody: the same key and document again is
// 200 with the first answer; the same key with another workload, or with
// another body for the same workload, is 409 naming Idempotency-Key and
// publishes nothing. A workload submitted again after its deletion, with
// no key, is a new submission (not a duplicate JetStream would drop).
func TestIdempotencyKeyIsKeyedToTheBody(t *testing.T) {
	f := newFrontDoor(t)
	key := map[string]string{"Idempotency-Key": "key-1"}
	submit := func(h map[string]string, body string) (int, answerBody, []byte) {
		t.Helper()
		code, _, out := f.do(t, "POST", "/v1/workloads", h, body)
		var a answerBody
		_ = json.Unmarshal(out, &a)
		return code, a, out
	}
	c1, a1, _ := submit(key, workload("a", "1"))
	c2, a2, _ := submit(key, workload("a", "1"))
	if c1 != http.StatusAccepted || c2 != http.StatusOK || a1 != a2 {
		t.Fatalf("same key, same body: %d %+v then %d %+v", c1, a1, c2, a2)
	}
	for _, tc := range []struct{ name, body string }{
		{"another workload", workload("b", "1")},
		{"another body", workload("a", "2")},
	} {
		code, _, out := submit(key, tc.body)
		if code != http.StatusConflict || fieldOf(t, out) != "Idempotency-Key" {
			t.Errorf("same key, %s: %d %s, want 409 on Idempotency-Key", tc.name, code, out)
		}
	}
	if f.has(t, events.WorkloadSubject("ns", "b")) {
		t.Error("the workload sent under a reused key is in the stream")
	}
	generated := strings.Replace(workload("", "1"), `"name":""`, `"generateName":"gen-"`, 1)
	g1, ga1, _ := submit(map[string]string{"Idempotency-Key": "key-2"}, generated)
	g2, ga2, _ := submit(map[string]string{"Idempotency-Key": "key-2"}, generated)
	if g1 != http.StatusAccepted || g2 != http.StatusOK || ga1 != ga2 || !strings.HasPrefix(ga1.Name, "gen-") {
		t.Errorf("generateName under one key: %d %+v then %d %+v", g1, ga1, g2, ga2)
	}
	if c, _, _ := submit(nil, workload("c", "1")); c != http.StatusAccepted {
		t.Fatalf("submit c: %d", c)
	}
	if c, _, out := f.do(t, "DELETE", "/v1/workloads/ns/c", nil, ""); c != http.StatusAccepted {
		t.Fatalf("delete c: %d %s", c, out)
	}
	if c, _, out := submit(nil, workload("c", "1")); c != http.StatusAccepted {
		t.Fatalf("c again after its deletion: %d %s, want 202", c, out)
	}
	if n := f.messages(t); n != 5 {
		t.Errorf("stream holds %d events, want 5 (a, gen-, c, delete c, c)", n)
	}
}

// TestIdempotencyKeyIsBounded: an oversized or binary key is a 400
// naming it.
func TestIdempotencyKeyIsBounded(t *testing.T) {
	f := newFrontDoor(t)
	for _, k := range []string{strings.Repeat("k", maxIdempotencyKey+1), "a\x01b"} {
		code, _, out := f.do(t, "POST", "/v1/workloads", map[string]string{"Idempotency-Key": k}, workload("a", "1"))
		if code != http.StatusBadRequest || fieldOf(t, out) != "Idempotency-Key" {
			t.Errorf("key of %d bytes: %d %s, want 400 on Idempotency-Key", len(k), code, out)
		}
	}
	if n := f.messages(t); n != 0 {
		t.Errorf("stream holds %d events, want 0", n)
	}
}

// TestMultiDocumentSubmitIsAllOrNothing: when one workload of a request
// cannot be stored, none is.
func TestMultiDocumentSubmitIsAllOrNothing(t *testing.T) {
	f := newFrontDoor(t)
	subject := events.WorkloadSubject("ns", "y")
	real := f.stream
	f.stream = movingStream{Stream: real, subject: subject, move: func() {
		ev := f.event(events.WorkloadDeleted, subject, &events.WorkloadRef{Namespace: "ns", Name: "y"})
		if _, _, err := bus.Publish(context.Background(), f.js, ev, nil); err != nil {
			t.Error(err)
		}
	}}
	code, _, out := f.do(t, "POST", "/v1/workloads", nil, list(workload("x", "1"), workload("y", "1")))
	if code != http.StatusConflict {
		t.Fatalf("%d %s, want 409", code, out)
	}
	if f.has(t, events.WorkloadSubject("ns", "x")) {
		t.Error("the first workload of a refused request is in the stream")
	}
	if n := f.messages(t); n != 1 {
		t.Errorf("stream holds %d events, want 1 (the concurrent deletion)", n)
	}
}

// TestJQBatchIsBounded: a JQ-Batch announcing more members than one
// request may carry, or with an id outside its charset, is a 400 naming
// the header, and nothing is published.
func TestJQBatchIsBounded(t *testing.T) {
	f := newFrontDoor(t)
	for _, v := range []string{"evil/1000000", "evil/1001", "ev il/2", strings.Repeat("x", 65) + "/2", "x/0"} {
		code, _, out := f.do(t, "POST", "/v1/workloads/ns/w/finish", map[string]string{"JQ-Batch": v}, "")
		if code != http.StatusBadRequest || fieldOf(t, out) != "JQ-Batch" {
			t.Errorf("JQ-Batch %q: %d %s, want 400 on JQ-Batch", v, code, out)
		}
	}
	if code, _, _ := f.do(t, "POST", "/v1/workloads/ns/w/finish", map[string]string{"JQ-Batch": "ok/1000"}, ""); code != http.StatusNotFound {
		t.Errorf("JQ-Batch ok/1000 on an unknown workload: %d, want 404 (the header is fine)", code)
	}
	if n := f.messages(t); n != 0 {
		t.Errorf("stream holds %d events, want 0", n)
	}
}

// TestServerErrorsNameARequestIDAndNoInternals: with the database gone, a
// query answers 500 with a request id (in the body and X-Request-Id) and
// nothing of the database (user, host, name, the word postgres); the log
// has the internal error under the same id.
func TestServerErrorsNameARequestIDAndNoInternals(t *testing.T) {
	f := newFrontDoor(t)
	f.store.Close()
	code, header, body := f.do(t, "GET", "/v1/workloads", nil, "")
	if code != http.StatusInternalServerError {
		t.Fatalf("%d %s, want 500", code, body)
	}
	var out errorBody
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	id := header.Get(HeaderRequestID)
	if id == "" || out.RequestID != id {
		t.Fatalf("request id %q in the body, %q in the header", out.RequestID, id)
	}
	u, err := url.Parse(f.db)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"postgres", "pgx", "pool", u.Hostname(), strings.TrimPrefix(u.Path, "/"), u.User.Username(), u.Query().Get("search_path")}
	for _, s := range secrets {
		if s != "" && bytes.Contains(bytes.ToLower(body), []byte(strings.ToLower(s))) {
			t.Errorf("the 500 says %q: %s", s, body)
		}
	}
	lines := f.logs.FilterField(zap.String("request_id", id)).All()
	if len(lines) != 1 {
		t.Fatalf("%d log lines carry request id %s, want 1", len(lines), id)
	}
	if msg := lines[0].ContextMap()["error"]; msg == nil || !strings.Contains(strings.ToLower(msg.(string)), "closed") {
		t.Errorf("the log line does not carry the internal error: %v", lines[0].ContextMap())
	}
}

// TestHTTPLimits: headers beyond the limit are refused with 431; a sync
// that waits longer than the write timeout still gets its answer.
func TestHTTPLimits(t *testing.T) {
	f := newFrontDoor(t)
	f.cfg.HTTP = HTTPLimits{WriteTimeout: 100 * time.Millisecond, MaxHeaderBytes: 4 << 10}
	srv := f.httpServer(f.h)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + lis.Addr().String()

	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB of headers: %d, want 431", resp.StatusCode)
	}

	// Nothing processes the stream here, so sync waits out its timeout
	// and answers 504, well after the server's write timeout.
	if _, _, err := bus.Publish(t.Context(), f.js, f.event(events.PodsReady, events.WorkloadSubject("ns", "w"),
		&events.WorkloadRef{Namespace: "ns", Name: "w"}), nil); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(base + "/v1/sync?timeout=500ms")
	if err != nil {
		t.Fatalf("sync longer than the write timeout: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("sync: %d %s %v, want 504", resp.StatusCode, body, err)
	}
}
