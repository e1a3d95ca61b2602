package ingest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// outageDoor is newFrontDoor's Server with its NATS server at hand, to
// take JetStream or the whole server away, and the NATS door served.
func outageDoor(t *testing.T) (*frontDoor, *server.Server, *nats.Conn) {
	t.Helper()
	ctx := t.Context()
	srv := testenv.NATS(t)
	conn, err := bus.Open(ctx, srv.ClientURL(), t.Name(), bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.NC.Close)
	db := testenv.Postgres(t)
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	core, logs := observer.New(zap.InfoLevel)
	s := &Server{cfg: Config{Now: time.Now, MaxBody: 1 << 20}, log: zap.New(core), js: conn.JS, stream: conn.Stream,
		store: st, rebuild: make(chan chan error), guard: &Guard{Anonymous: true}}
	f := &frontDoor{Server: s, h: s.routes(), logs: logs, db: db}
	if _, err := s.serveNATS(conn.NC, f.h); err != nil {
		t.Fatal(err)
	}
	client, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return f, srv, client
}

// wantRetryable asserts an answer a client should retry: 503 with
// Retry-After, and a request id to find the cause in the log.
func wantRetryable(t *testing.T, what string, code int, retryAfter string, body []byte) {
	t.Helper()
	var out errorBody
	_ = json.Unmarshal(body, &out)
	if s, err := strconv.Atoi(retryAfter); code != http.StatusServiceUnavailable || err != nil || s < 1 || out.RequestID == "" {
		t.Errorf("%s: %d, Retry-After %q, body %s; want 503 with Retry-After and a request id", what, code, retryAfter, body)
	}
}

// TestJetStreamOutageIsRetryable: while JetStream is down (its server
// shut JetStream down, as a cluster without a stream leader answers
// nothing) a submission is 503 with Retry-After at the HTTP door and at
// the NATS request/reply door, never 500 (a bug) or 4xx (the client's
// fault); so is a read that must consult the stream.
func TestJetStreamOutageIsRetryable(t *testing.T) {
	f, srv, client := outageDoor(t)
	if code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload("before", "1")); code != http.StatusAccepted {
		t.Fatalf("submit before the outage: %d %s", code, body)
	}
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}

	code, h, body := f.do(t, "POST", "/v1/workloads", map[string]string{"Idempotency-Key": "k-1"}, workload("during", "1"))
	wantRetryable(t, "HTTP submit", code, h.Get("Retry-After"), body)

	reply, err := client.Request(SubjectSubmit, []byte(workload("during-nats", "1")), 20*time.Second)
	if err != nil {
		t.Fatalf("NATS submit: %v", err)
	}
	status, _ := strconv.Atoi(reply.Header.Get("Status"))
	wantRetryable(t, "NATS submit", status, reply.Header.Get("Retry-After"), reply.Data)

	code, h, body = f.do(t, "GET", "/v1/workloads?minSeq=1", nil, "")
	wantRetryable(t, "a read after a write", code, h.Get("Retry-After"), body)
}

// TestNATSOutageIsRetryable: with the NATS server itself gone (ingest's
// connection reconnecting), a submission waits out its request's bound
// and is answered 503 with Retry-After, not 500.
func TestNATSOutageIsRetryable(t *testing.T) {
	f, srv, _ := outageDoor(t)
	srv.Shutdown()
	code, h, body := f.do(t, "POST", "/v1/workloads", nil, workload("during", "1"))
	wantRetryable(t, "HTTP submit", code, h.Get("Retry-After"), body)
}
