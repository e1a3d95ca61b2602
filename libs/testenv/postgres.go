package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var errNotReady = errors.New("server did not become ready in time")

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
		admin, stop, err = StartCluster(ctx, "")
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

// StartCluster initialises a private PostgreSQL cluster under dir (a new
// temporary directory when empty, removed on stop) and starts it on a free
// port with its own socket directory, so that several never collide. It
// returns an admin URL and a stop function.
func StartCluster(ctx context.Context, dir string) (string, func(), error) {
	bin, err := pgBin()
	if err != nil {
		return "", nil, err
	}
	temporary := dir == ""
	if temporary {
		if dir, err = os.MkdirTemp("", "jq-pg-"); err != nil {
			return "", nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	if err := ownForServer(dir); err != nil {
		return "", nil, err
	}
	data := filepath.Join(dir, "pgdata")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		out, err := runAs(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
		if err != nil {
			return "", nil, fmt.Errorf("initdb: %v: %s", err, out)
		}
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	logFile := filepath.Join(dir, "postgres.log")
	out, err := runAs(ctx, filepath.Join(bin, "pg_ctl"), "-D", data, "-l", logFile, "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir), "start")
	if err != nil {
		return "", nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = runAs(ctx, filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		if temporary {
			_ = os.RemoveAll(dir)
		}
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

// pgBin finds the newest local PostgreSQL server binaries.
func pgBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("initdb not found")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func redact(url string) string {
	if cfg, err := pgx.ParseConfig(url); err == nil {
		return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	return "(unparseable DATABASE_URL)"
}
