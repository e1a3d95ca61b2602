package service

import (
	"flag"

	"github.com/jetqueue/jetqueue/libs/bus"
)

// RegisterIdentityFlags declares how a program authenticates to NATS and
// verifies it. Every service and jqctl use the same names, so a deployment
// sets them alike everywhere; like every flag, each also reads JQ_<NAME>
// (JQ_NATS_PASSWORD keeps the password out of the process list).
func RegisterIdentityFlags(fs *flag.FlagSet, id *bus.Identity) {
	fs.StringVar(&id.Creds, "nats-creds", "", "NATS JWT credentials file (user JWT and nkey seed); excludes --nats-nkey and --nats-user")
	fs.StringVar(&id.NKey, "nats-nkey", "", "file holding this program's NATS nkey user seed; excludes --nats-creds and --nats-user")
	fs.StringVar(&id.User, "nats-user", "", "NATS user name (with --nats-password); excludes --nats-creds and --nats-nkey")
	fs.StringVar(&id.Password, "nats-password", "", "NATS password of --nats-user; prefer the environment (JQ_NATS_PASSWORD) to the command line")
	fs.StringVar(&id.CA, "nats-ca", "", "PEM file of the CAs that sign the NATS server's certificate (TLS)")
	fs.StringVar(&id.Cert, "nats-cert", "", "PEM client certificate presented to NATS (mTLS), with --nats-key")
	fs.StringVar(&id.Key, "nats-key", "", "PEM private key of --nats-cert")
}
