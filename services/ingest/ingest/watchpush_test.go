package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetqueue/jetqueue/libs/store"
)

type countQueries struct{ n atomic.Int64 }

func (c *countQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *countQueries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestWatchIsPushed: a watch (?watch=true) is woken by the projector's
// commit, not by a poll loop. While it waits for an event, the server
// sends PostgreSQL no statement at all; when a submission is projected
// (by another connection, as the projector would), its ADDED event
// arrives on the open stream.
func TestWatchIsPushed(t *testing.T) {
	f := newFrontDoor(t)
	projector := f.store
	cfg, err := pgxpool.ParseConfig(f.db)
	if err != nil {
		t.Fatal(err)
	}
	queries := &countQueries{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.Server.store = &store.Store{Pool: pool}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := f.projected().Wait(ctx, 0); err != nil {
		t.Fatal(err)
	}
	project := func(seq uint64) {
		t.Helper()
		f.projectInto(t, projector, seq)
	}
	if code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload("w1", "1")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	project(1)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/apis/kueue.x-k8s.io/v1beta1/namespaces/ns/workloads?watch=true&timeoutSeconds=60", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", err, resp)
	}
	defer resp.Body.Close()
	lines := make(chan watchEvent, 4)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev watchEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				lines <- ev
			}
		}
		close(lines)
	}()
	name := func(ev watchEvent) string {
		md, _ := ev.Object["metadata"].(map[string]any)
		n, _ := md["name"].(string)
		return ev.Type + " " + n
	}
	if ev := <-lines; name(ev) != "ADDED w1" {
		t.Fatalf("first event %q, want ADDED w1", name(ev))
	}
	// Idle: the submission below is published but not projected yet,
	// and then nothing moves.
	if code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload("w2", "1")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	before := queries.n.Load()
	select {
	case ev := <-lines:
		t.Fatalf("event %q before the projection held it", name(ev))
	case <-time.After(300 * time.Millisecond):
	}
	if n := queries.n.Load() - before; n != 0 {
		t.Errorf("while the watch waited, the server sent %d statements, want 0", n)
	}
	project(2)
	if ev := <-lines; name(ev) != "ADDED w2" {
		t.Errorf("event %q, want ADDED w2", name(ev))
	}
}
