package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

// postgres is a private PostgreSQL cluster the suite initialises, whose
// postmaster it runs directly, so that it can kill it: never the
// machine's shared server, never DATABASE_URL's.
type postgres struct {
	*proc
	dir  string
	port int
}

// URL is the cluster's admin URL.
func (pg *postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// startPostgres initialises a cluster in a new directory under the
// system's temporary directory (the server's user must reach it, which a
// test's 0700 TempDir forbids) and starts it.
func startPostgres(logDir string) (*postgres, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "jq-chaos-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("postgres dir: %w", err)
		}
	}
	data := filepath.Join(dir, "pgdata")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir, port: port, proc: &proc{
		name: "postgres", path: filepath.Join(bin, "postgres"), logPath: filepath.Join(logDir, "postgres.log"), cred: cred,
		args: func(int) []string {
			return []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
				"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"}
		},
	}}
	return pg, pg.restart()
}

// restart starts the postmaster and waits until it answers. Right after a
// SIGKILL, the old backends may still hold the shared memory for a moment
// and the new postmaster exits: it is tried again.
func (pg *postgres) restart() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := pg.start(); err != nil {
			return err
		}
		err := pg.ready(15 * time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not restart: %w", err)
		}
		pg.kill()
		time.Sleep(500 * time.Millisecond)
	}
}

func (pg *postgres) ready(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		alive, _ := pg.running()
		if !alive {
			return fmt.Errorf("postmaster exited: %s", pg.tail(3))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, pg.URL())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// close stops the cluster for good (SIGQUIT: the immediate shutdown that
// also ends its backends) and removes its directory.
func (pg *postgres) close() {
	pg.stop(syscall.SIGQUIT)
	_ = os.RemoveAll(pg.dir)
}

// serverUser is who runs PostgreSQL when we are root, which it refuses.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// pgBin finds the newest local PostgreSQL server binaries.
func pgBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", fmt.Errorf("initdb not found: install PostgreSQL's server binaries")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// natsServer is a nats-server process with JetStream, restartable on the
// same port and store directory.
type natsServer struct {
	*proc
	port int
}

func (n *natsServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func startNATS(bin, storeDir, logDir string) (*natsServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &natsServer{port: port, proc: &proc{
		name: "nats", path: bin, logPath: filepath.Join(logDir, "nats.log"), restartOnExit: true,
		args: func(int) []string {
			return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", storeDir}
		},
	}}
	return n, n.restart()
}

// restart starts nats-server and waits until JetStream answers.
func (n *natsServer) restart() error {
	if err := n.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(n.URL(), nats.Timeout(time.Second))
		if err == nil {
			_, err = nc.RTT()
			nc.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server did not start: %w: %s", err, n.tail(5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
