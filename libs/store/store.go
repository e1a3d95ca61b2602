// Package store is the PostgreSQL projection of JQ_EVENTS: current
// workload state, per-workload history, per-queue usage and config
// objects, written in batches guarded by stream sequence and read by the
// query API.
package store

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a connection pool to the projection database.
type Store struct {
	Pool *pgxpool.Pool
}

// Open connects and applies the embedded migrations under an advisory lock,
// so that several instances starting at once migrate exactly once.
func Open(ctx context.Context, url string) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect projection database: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{Pool: pool}, nil
}

// Close releases the pool.
func (s *Store) Close() { s.Pool.Close() }

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	// The advisory lock is per schema (tests isolate themselves in
	// schemas of one database), and retried every second (goose waits 5s
	// between tries).
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("projection schema: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("jetqueue migrations " + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, dir, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Reset drops every projected row (parked events included) and rewinds
// to sequence 0, for `jqctl projection rebuild`. It takes the position's
// row lock first, as Apply does, so the two serialize instead of
// deadlocking; the projector's next batch is then out of sequence and it
// reads the stream again from the start.
func (s *Store) Reset(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT last_seq FROM projection_state FOR UPDATE`); err != nil {
			return fmt.Errorf("lock the projection's position: %w", err)
		}
		if _, err := tx.Exec(ctx, `TRUNCATE workloads, workload_events, queue_usage, config_objects, parked_events`); err != nil {
			return fmt.Errorf("drop the projection: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE projection_state SET last_seq = 0`); err != nil {
			return fmt.Errorf("rewind the projection: %w", err)
		}
		if _, err := tx.Exec(ctx, notifyProgress, "0"); err != nil {
			return fmt.Errorf("notify the rewind: %w", err)
		}
		return nil
	})
}

// LastSeq is the last stream sequence the projection applied.
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	var seq int64
	err := s.Pool.QueryRow(ctx, `SELECT last_seq FROM projection_state`).Scan(&seq)
	return uint64(seq), err
}

// ParkedEvent is an event the projection stored aside (see Parked).
type ParkedEvent struct {
	Seq      uint64
	Type     string
	Subject  string
	Reason   string
	Data     []byte
	ParkedAt time.Time
}

// maxParkedList bounds one listing of parked events.
const maxParkedList = 1000

// ParkedEvents lists the parked events in stream order, at most limit
// (at most 1000).
func (s *Store) ParkedEvents(ctx context.Context, limit int) ([]ParkedEvent, error) {
	if limit <= 0 || limit > maxParkedList {
		limit = maxParkedList
	}
	rows, err := s.Pool.Query(ctx, `SELECT seq, type, subject, reason, data, parked_at FROM parked_events ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list parked events: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ParkedEvent, error) {
		var p ParkedEvent
		var seq int64
		err := row.Scan(&seq, &p.Type, &p.Subject, &p.Reason, &p.Data, &p.ParkedAt)
		p.Seq = uint64(seq)
		return p, err
	})
}
