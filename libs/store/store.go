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

// Reset drops every projected row and rewinds to sequence 0, for
// `jqctl projection rebuild`.
func (s *Store) Reset(ctx context.Context) error {
	_, err := s.Pool.Exec(ctx, `
		TRUNCATE workloads, workload_events, queue_usage, config_objects;
		UPDATE projection_state SET last_seq = 0;`)
	return err
}

// LastSeq is the last stream sequence the projection applied.
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	var seq int64
	err := s.Pool.QueryRow(ctx, `SELECT last_seq FROM projection_state`).Scan(&seq)
	return uint64(seq), err
}
