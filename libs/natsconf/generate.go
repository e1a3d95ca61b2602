package natsconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jetqueue/jetqueue/libs/secret"
)

// Passwords gives every user of a Config (the services, NodesUser, and
// one submitter per namespace, named as the namespace) a random password
// kept in dir/<user>.password, made on first use and reused after, so
// that a restart keeps the credentials clients were given. It returns the
// Config and each user's password.
func Passwords(dir string, namespaces []string) (Config, map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Config{}, nil, err
	}
	pw := map[string]string{}
	get := func(user string) (string, error) {
		if p, ok := pw[user]; ok {
			return p, nil
		}
		p, err := password(filepath.Join(dir, user+".password"))
		pw[user] = p
		return p, err
	}
	c := Config{Services: map[string]Secret{}}
	for _, name := range append(append([]string{}, Services...), NodesUser) {
		p, err := get(name)
		if err != nil {
			return Config{}, nil, err
		}
		c.Services[name] = Secret{Password: p}
	}
	for _, ns := range namespaces {
		if _, clash := c.Services[ns]; clash {
			return Config{}, nil, fmt.Errorf("namespace %q has the name of a service user", ns)
		}
		p, err := get(ns)
		if err != nil {
			return Config{}, nil, err
		}
		c.Namespaces = append(c.Namespaces, Namespace{Name: ns, Submitters: []Submitter{{Name: ns, Secret: Secret{Password: p}}}})
	}
	return c, pw, nil
}

// password reads the password kept in file, or makes one (128 random
// bits) and keeps it there, readable by its owner only.
func password(file string) (string, error) { return secret.Kept(file, 16) }

// EnvPasswords is the Config of deploy/nats/jetqueue.conf: each password
// is the server's environment variable JQ_NATS_<USER>_PASSWORD (dashes as
// underscores), so the file holds no secret and the same file serves
// compose and Kubernetes, which set the variables from their secrets.
func EnvPasswords(namespaces []string) Config {
	c := Config{Services: map[string]Secret{}}
	for _, name := range append(append([]string{}, Services...), NodesUser) {
		c.Services[name] = Secret{Password: "$" + PasswordEnv(name)}
	}
	for _, ns := range namespaces {
		c.Namespaces = append(c.Namespaces, Namespace{Name: ns, Submitters: []Submitter{{Name: ns, Secret: Secret{Password: "$" + PasswordEnv(ns)}}}})
	}
	return c
}

// PasswordEnv is the server's variable holding user's password.
func PasswordEnv(user string) string {
	return "JQ_NATS_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// ShippedNamespaces are the namespaces of deploy/nats/jetqueue.conf: the
// examples' teams. A site lists its own.
var ShippedNamespaces = []string{"team-a", "team-b"}
