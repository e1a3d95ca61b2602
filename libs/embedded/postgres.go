package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// StartPostgres initialises a private PostgreSQL cluster under dir (a new
// temporary directory when empty, removed on stop) and starts it on a free
// port with its own socket directory, so that several never collide. It
// returns an admin URL and a stop function. The stop is immediate (no
// checkpoint, connections cut), as a crash would be.
func StartPostgres(ctx context.Context, dir string) (string, func(), error) {
	return StartPostgresOn(ctx, dir, 0)
}

// StartPostgresOn is StartPostgres on a given port (0: a free one): a
// cluster in a kept dir, stopped, starts again where its clients look
// for it, as a database server restarting after a crash.
func StartPostgresOn(ctx context.Context, dir string, port int) (string, func(), error) {
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
	if port == 0 {
		if port, err = freePort(); err != nil {
			return "", nil, err
		}
	}
	if err := stopLeftover(ctx, bin, data); err != nil {
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

// stopLeftover stops a server still running on data: one whose owner
// was killed (SIGKILL of jqctl dev, of a test) leaves its postmaster
// behind, as pg_ctl daemonizes it, and a new start on the same data would
// fail with "another server might be running". pg_ctl status says
// whether postmaster.pid names a live postmaster of this data directory;
// a stale pid file alone pg_ctl start handles itself.
func stopLeftover(ctx context.Context, bin, data string) error {
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
		return nil
	}
	if _, err := runAs(ctx, filepath.Join(bin, "pg_ctl"), "-D", data, "status"); err != nil {
		return nil // not running
	}
	if out, err := runAs(ctx, filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("stop the PostgreSQL server left running on %s: %v: %s", data, err, out)
	}
	return nil
}

// ErrNoPostgres says no PostgreSQL server binaries are installed.
var ErrNoPostgres = errors.New("the PostgreSQL server's binaries (initdb, pg_ctl) are not installed")

// pgBin finds the newest local PostgreSQL server binaries.
func pgBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", ErrNoPostgres
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
