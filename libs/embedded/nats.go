package embedded

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

var errNotReady = errors.New("server did not become ready in time")

// StartNATS starts an embedded JetStream server storing under dir, on a
// random local port, open to anyone who reaches it. The caller shuts it
// down.
func StartNATS(dir string) (*server.Server, error) {
	return StartNATSFrom(dir, "")
}

// StartNATSFrom is StartNATS with the accounts, users and permissions of
// a nats-server configuration file (natsconf renders jetqueue's); "" means
// none. The listener, the store and logging stay StartNATS's, whatever the
// file says. tune may change the options last (a test's TLS, say).
func StartNATSFrom(dir, configFile string, tune ...func(*server.Options)) (*server.Server, error) {
	opts := &server.Options{}
	if configFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(configFile); err != nil {
			return nil, fmt.Errorf("NATS configuration %s: %w", configFile, err)
		}
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, dir
	opts.NoLog, opts.NoSigs = true, true
	for _, f := range tune {
		f(opts)
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
