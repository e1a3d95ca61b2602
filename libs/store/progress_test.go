package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// countQueries counts the statements a pool's connections send.
type countQueries struct{ n atomic.Int64 }

func (c *countQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *countQueries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestProgressIsPushed: a waiter on the projection's position is woken by
// the projector's commit (NOTIFY), and while it waits its Progress sends
// no query at all: there is no poll loop. Idle, the count stays at the
// two statements of starting to listen (LISTEN and one read of the
// position); a commit elsewhere moves the position without another.
func TestProgressIsPushed(t *testing.T) {
	url := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	writer, err := Open(ctx, url) // migrates; the projector's side
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	queries := &countQueries{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	p := (&Store{Pool: pool}).Follow(fctx)
	if at, err := p.Wait(ctx, 0); err != nil || at != 0 {
		t.Fatalf("start: %d %v", at, err)
	}
	if n := queries.n.Load(); n != 2 {
		t.Fatalf("starting to listen sent %d statements, want 2", n)
	}
	// Idle: a waiter for a sequence not yet projected.
	idle, cancelIdle := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := p.Wait(idle, 1); err == nil {
		t.Fatal("Wait returned before anything was projected")
	}
	cancelIdle()
	if n := queries.n.Load(); n != 2 {
		t.Errorf("while idle the follower sent %d statements, want none after the 2 of starting", n-2)
	}
	l := story()
	done := make(chan uint64, 1)
	go func() {
		at, _ := p.Wait(ctx, uint64(len(l.recs)))
		done <- at
	}()
	if _, err := writer.Apply(ctx, l.recs); err != nil {
		t.Fatal(err)
	}
	if at := <-done; at != uint64(len(l.recs)) {
		t.Errorf("woken at %d, want %d", at, len(l.recs))
	}
	if n := queries.n.Load(); n != 2 {
		t.Errorf("following a commit sent %d statements, want none", n-2)
	}
}

// TestProgressIgnoresOtherSchemas: NOTIFY channels are per database, and
// two installations (or two tests) may share one in different schemas; a
// commit in one must not wake the other's waiters as if its own
// projection had moved.
func TestProgressIgnoresOtherSchemas(t *testing.T) {
	urlA := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	urlB, drop, err := testenv.CreateSchema(ctx, urlA)
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	a, err := Open(ctx, urlA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, urlB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	pb := b.Follow(fctx)
	if at, err := pb.Wait(ctx, 0); err != nil || at != 0 {
		t.Fatalf("start: %d %v", at, err)
	}
	l := story()
	if _, err := a.Apply(ctx, l.recs); err != nil {
		t.Fatal(err)
	}
	// A follower of A, started after the commit, sees it: the commit is done.
	pa := a.Follow(fctx)
	if at, err := pa.Wait(ctx, uint64(len(l.recs))); err != nil || at != uint64(len(l.recs)) {
		t.Fatalf("schema A at %d (%v), want %d", at, err, len(l.recs))
	}
	idle, cancelIdle := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelIdle()
	if at, err := pb.Wait(idle, 1); err == nil {
		t.Fatalf("schema B's waiter woke at %d after a commit in schema A; B projected nothing", at)
	}
}
