package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/service"
)

// natsIdentityFlags are the services' NATS identity flags, for a jqctl
// command that talks to NATS. A flag not given takes JQ_<NAME>, as a
// service's would; the environment is read when the command runs, so that
// `--help` never prints a password.
var natsIdentityFlags = []struct{ name, usage string }{
	{"nats-creds", "NATS JWT credentials file (env JQ_NATS_CREDS)"},
	{"nats-nkey", "file holding a NATS nkey user seed (env JQ_NATS_NKEY)"},
	{"nats-user", "NATS user name (env JQ_NATS_USER)"},
	{"nats-password", "NATS password of --nats-user (env JQ_NATS_PASSWORD, which keeps it out of the process list)"},
	{"nats-ca", "PEM file of the CAs that sign the NATS server's certificate (env JQ_NATS_CA)"},
	{"nats-cert", "PEM client certificate presented to NATS, with --nats-key (env JQ_NATS_CERT)"},
	{"nats-key", "PEM private key of --nats-cert (env JQ_NATS_KEY)"},
}

func addNATSIdentityFlags(cmd *cobra.Command) {
	for _, f := range natsIdentityFlags {
		cmd.Flags().String(f.name, "", f.usage)
	}
}

// natsIdentity reads the identity flags of cmd, falling back to the
// environment.
func natsIdentity(cmd *cobra.Command) bus.Identity {
	get := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return f.Value.String()
		}
		return os.Getenv(service.EnvName(name))
	}
	return bus.Identity{Creds: get("nats-creds"), NKey: get("nats-nkey"), User: get("nats-user"), Password: get("nats-password"),
		CA: get("nats-ca"), Cert: get("nats-cert"), Key: get("nats-key")}
}
