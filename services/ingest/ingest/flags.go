package ingest

import (
	"flag"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/service"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	service.RegisterIdentityFlags(fs, &c.NATS)
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL of the projection (also DATABASE_URL)")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP API")
	fs.Int64Var(&c.MaxBody, "max-body", 1<<20, "largest request body accepted, in bytes")
	auth.RegisterFlags(fs, &c.Auth)
	fs.DurationVar(&c.HTTP.ReadHeaderTimeout, "http-read-header-timeout", DefaultHTTPLimits.ReadHeaderTimeout, "longest wait for a request's headers")
	fs.DurationVar(&c.HTTP.ReadTimeout, "http-read-timeout", DefaultHTTPLimits.ReadTimeout, "longest wait for a whole request, body included")
	fs.DurationVar(&c.HTTP.WriteTimeout, "http-write-timeout", DefaultHTTPLimits.WriteTimeout, "longest time to handle a request and answer it (GET /v1/sync and the clock advance extend theirs to their own longest wait)")
	fs.DurationVar(&c.HTTP.IdleTimeout, "http-idle-timeout", DefaultHTTPLimits.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&c.HTTP.MaxHeaderBytes, "http-max-header-bytes", DefaultHTTPLimits.MaxHeaderBytes, "largest request headers accepted, in bytes (431 beyond)")
	fs.Uint64Var(&c.MaxLag, "max-admission-lag", 50000, "events admission may lag before submissions get 503 (0: never)")
	fs.BoolVar(&c.ManualClock, "manual-clock", false, "dev/test only: read the shared manual clock and serve POST /v1/debug/clock/advance")
	fs.BoolVar(&c.KubeBridge, "kube-bridge", false, "admit Kubernetes batch/v1 Jobs labelled kueue.x-k8s.io/queue-name (see docs/kubernetes.md)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file of --kube-bridge (empty: the in-cluster service account)")
	fs.IntVar(&c.Stream.Replicas, "stream-replicas", 1, "JQ_EVENTS replicas")
}
