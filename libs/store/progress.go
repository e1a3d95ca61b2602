package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The projector's commits are pushed, not polled: Apply's transaction
// ends with pg_notify(ProgressChannel, last_seq), which PostgreSQL
// delivers to every listener when (and only if) the transaction commits.
// A Progress holds one connection listening on the channel for a whole
// process and wakes every waiter at once when the position moves:
//
//	projector ──Apply: COMMIT (NOTIFY jetqueue_projection 'N')──▶ Progress (LISTEN, one connection) ──close(changed)──▶ waiters (watch streams, minSeq reads)
//
// Waiters hold no buffer of their own: they share one channel that is
// closed and replaced on each advance, and read the position itself.

// ProgressChannel is the notification channel of the projection's
// position.
const ProgressChannel = "jetqueue_projection"

// notifyProgress is run in Apply's transaction.
//
// A channel is one per database, and installations (or tests) may share a
// database in different schemas: the payload names the schema, so that a
// commit in another schema never moves this one's position.
const notifyProgress = `SELECT pg_notify('` + ProgressChannel + `', current_schema() || ' ' || $1::text)`

// Progress follows the projection's position by notification.
type Progress struct {
	mu      sync.Mutex
	seq     uint64
	known   bool
	changed chan struct{}
}

// progressRetry is how long Follow waits before listening again after
// its connection failed.
const progressRetry = time.Second

// Follow starts following the projection's position until ctx ends. It
// reads the position once each time it (re)starts listening, after the
// LISTEN, so that no commit falls between the two; then only
// notifications move it.
func (s *Store) Follow(ctx context.Context) *Progress {
	p := &Progress{changed: make(chan struct{})}
	go func() {
		for ctx.Err() == nil {
			_ = s.listen(ctx, p)
			select {
			case <-ctx.Done():
			case <-time.After(progressRetry):
			}
		}
	}()
	return p
}

func (s *Store) listen(ctx context.Context, p *Progress) error {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection holds a LISTEN: it is taken out of the pool and
	// closed, never given back.
	pc := conn.Hijack()
	defer pc.Close(context.Background()) //nolint:errcheck // closing a connection we own
	if _, err := pc.Exec(ctx, `LISTEN `+ProgressChannel); err != nil {
		return err
	}
	var schema string
	var seq int64
	if err := pc.QueryRow(ctx, `SELECT current_schema(), last_seq FROM projection_state`).Scan(&schema, &seq); err != nil {
		return err
	}
	p.set(uint64(seq))
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		i := strings.LastIndexByte(n.Payload, ' ')
		if i < 0 || n.Payload[:i] != schema {
			continue
		}
		v, err := strconv.ParseUint(n.Payload[i+1:], 10, 64)
		if err != nil {
			continue
		}
		// A rewind (Reset) sends 0: the position is whatever was last
		// committed, not the highest seen.
		p.set(v)
	}
}

func (p *Progress) set(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known && p.seq == seq {
		return
	}
	p.seq, p.known = seq, true
	close(p.changed)
	p.changed = make(chan struct{})
}

// Seq is the position last seen, and whether one was seen yet.
func (p *Progress) Seq() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq, p.known
}

// Wait returns once the projection holds the stream up to seq, with the
// position; it returns ctx's error (and the position last seen) if ctx
// ends first.
func (p *Progress) Wait(ctx context.Context, seq uint64) (uint64, error) {
	for {
		p.mu.Lock()
		at, known, ch := p.seq, p.known, p.changed
		p.mu.Unlock()
		if known && at >= seq {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return at, ctx.Err()
		case <-ch:
		}
	}
}
