package embedded

import (
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

var errNotReady = errors.New("server did not become ready in time")

// StartNATS starts an embedded JetStream server storing under dir, on a
// random local port. The caller shuts it down.
func StartNATS(dir string) (*server.Server, error) {
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errNotReady
	}
	return srv, nil
}
