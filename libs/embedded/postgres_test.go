package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartAfterOwnerKilled: an owner killed without running its stop
// (SIGKILL of jqctl dev) leaves its postmaster running on the data
// directory. Starting again on that directory must stop the leftover and
// serve, not fail with "another server might be running".
func TestStartAfterOwnerKilled(t *testing.T) {
	if _, err := pgBin(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not t.TempDir(): the server runs as the postgres user, who cannot
	// enter its 0700 parents when the test runs as root.
	parent, err := os.MkdirTemp("", "jq-pg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "pg")
	_, stopFirst, err := StartPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	first := postmasterPID(t, dir)
	// The owner dies here: stopFirst is never called while it runs.
	url, stop, err := StartPostgres(ctx, dir)
	if err != nil {
		stopFirst()
		t.Fatalf("start after the owner was killed: %v", err)
	}
	defer stop()
	if err := syscall.Kill(first, 0); err == nil && postmasterPID(t, dir) == first {
		t.Fatalf("the leftover postmaster %d still serves the data directory", first)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}

// postmasterPID is the pid postmaster.pid names (its first line).
func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
