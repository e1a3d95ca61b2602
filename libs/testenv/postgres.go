package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jetqueue/jetqueue/libs/embedded"
)

// Postgres returns the URL of a fresh, empty database that is dropped when
// the test ends. With DATABASE_URL set, the database is created on that
// server; otherwise a throwaway cluster is initialised with the local
// PostgreSQL binaries (initdb, pg_ctl) in a temporary directory. Without
// either, the test fails with what to install: skipping would hide it.
func Postgres(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		var stop func()
		var err error
		admin, stop, err = embedded.StartPostgres(ctx, "")
		if err != nil {
			tb.Fatalf("no DATABASE_URL and no local cluster: %v (install PostgreSQL's server binaries or set DATABASE_URL)", err)
		}
		tb.Cleanup(stop)
	}
	dsn, drop, err := CreateSchema(ctx, admin)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(drop)
	return dsn
}

// CreateSchema creates a uniquely named schema on the server of adminURL
// and returns a URL whose search_path is that schema, and a function that
// drops it. A schema is as isolated as a database for the projection and
// takes milliseconds, where CREATE DATABASE copies a template and waits
// for a checkpoint (seconds on a slow disk).
func CreateSchema(ctx context.Context, adminURL string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "jq_test_" + hex.EncodeToString(suffix)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, adminURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
			_ = c.Close(ctx)
		}
	}
	return u.String(), drop, nil
}

func redact(url string) string {
	if cfg, err := pgx.ParseConfig(url); err == nil {
		return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	return "(unparseable DATABASE_URL)"
}
