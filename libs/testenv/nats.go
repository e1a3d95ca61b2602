// Package testenv starts the real infrastructure tests run against: an
// embedded nats-server with JetStream, and a PostgreSQL database (from
// DATABASE_URL, else a throwaway local cluster made with initdb). Nothing
// here is a mock.
package testenv

import (
	"os"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetqueue/jetqueue/libs/embedded"
)

// NATS starts an embedded nats-server with JetStream on a random port,
// storing in a temporary directory, and returns it; it is shut down when
// the test ends.
func NATS(tb testing.TB) *server.Server {
	tb.Helper()
	srv, err := embedded.StartNATS(storeDir(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// storeDir is a temporary directory in memory where the machine has one:
// a test's stream need not survive the machine, and on a disk its fsyncs
// queue behind every other test's (PostgreSQL's included), which once
// held a stream's creation past JetStream's request timeout.
func storeDir(tb testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "jetqueue-nats-")
	if err != nil {
		return tb.TempDir()
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
