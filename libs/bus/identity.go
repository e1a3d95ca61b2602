package bus

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Identity is who a jetqueue program is to NATS and how it trusts the
// server: at most one way to authenticate (a JWT creds file, an nkey seed
// file, or a user and password), and TLS files. The zero Identity connects
// anonymously over plain TCP, which is what a server without accounts (the
// tests' embedded one) expects.
type Identity struct {
	// Creds is a JWT creds file (user JWT and nkey seed), as `nsc` writes.
	Creds string
	// NKey is a file holding an nkey user seed.
	NKey string
	// User and Password authenticate by name.
	User, Password string
	// CA verifies the server's certificate; Cert and Key are this client's
	// certificate, for servers that verify clients (mTLS).
	CA, Cert, Key string
}

// ErrIdentity marks a contradictory Identity.
var ErrIdentity = errors.New("NATS identity")

// Check refuses an Identity that names two ways to authenticate, which
// would leave the server to pick one silently, or half a pair.
func (id Identity) Check() error {
	var ways []string
	if id.Creds != "" {
		ways = append(ways, "--nats-creds")
	}
	if id.NKey != "" {
		ways = append(ways, "--nats-nkey")
	}
	if id.User != "" || id.Password != "" {
		ways = append(ways, "--nats-user/--nats-password")
	}
	switch {
	case len(ways) > 1:
		return fmt.Errorf("%w: %s and %s are exclusive: authenticate one way", ErrIdentity, ways[0], ways[1])
	case id.Password != "" && id.User == "":
		return fmt.Errorf("%w: --nats-password without --nats-user", ErrIdentity)
	case (id.Cert == "") != (id.Key == ""):
		return fmt.Errorf("%w: --nats-cert and --nats-key go together", ErrIdentity)
	}
	return nil
}

// Options are nats.go's own options for the Identity.
func (id Identity) Options() ([]nats.Option, error) {
	if err := id.Check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case id.Creds != "":
		opts = append(opts, nats.UserCredentials(id.Creds))
	case id.NKey != "":
		o, err := nats.NkeyOptionFromSeed(id.NKey)
		if err != nil {
			return nil, fmt.Errorf("%w: --nats-nkey %s: %w", ErrIdentity, id.NKey, err)
		}
		opts = append(opts, o)
	case id.User != "":
		opts = append(opts, nats.UserInfo(id.User, id.Password))
	}
	if id.CA != "" {
		opts = append(opts, nats.RootCAs(id.CA))
	}
	if id.Cert != "" {
		opts = append(opts, nats.ClientCert(id.Cert, id.Key))
	}
	return opts, nil
}

// Dial is Connect as id.
func (id Identity) Dial(url, name string) (*nats.Conn, error) {
	opts, err := id.Options()
	if err != nil {
		return nil, err
	}
	return Connect(url, name, opts...)
}
