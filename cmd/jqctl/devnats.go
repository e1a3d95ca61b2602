package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/embedded"
	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// devNATS starts dev's embedded JetStream server with jetqueue's accounts
// (package natsconf): every service, the nodes writer and a submitter per
// example namespace get a random password, kept under dir/nats-auth and
// reused on the next start, and the rendered configuration is written to
// dir/nats.conf. Nobody connects without a user. It returns the server
// and each user's identity.
func devNATS(dir string) (*server.Server, map[string]bus.Identity, string, error) {
	authDir := filepath.Join(dir, "nats-auth")
	cfg, pw, err := natsconf.Passwords(authDir, natsconf.ShippedNamespaces)
	if err != nil {
		return nil, nil, "", fmt.Errorf("NATS users: %w", err)
	}
	text, err := natsconf.Render(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return nil, nil, "", err
	}
	srv, err := embedded.StartNATSFrom(filepath.Join(dir, "nats"), file)
	if err != nil {
		return nil, nil, "", err
	}
	ids := make(map[string]bus.Identity, len(pw))
	for user, p := range pw {
		ids[user] = bus.Identity{User: user, Password: p}
	}
	return srv, ids, authDir, nil
}
