package ingest

import (
	"flag"
	"strings"

	"github.com/jetqueue/jetqueue/libs/retention"

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
	fs.IntVar(&c.HTTP.MaxWatchesPerCaller, "max-watches-per-caller", DefaultHTTPLimits.MaxWatchesPerCaller,
		"most watches (?watch=true), and apart the most console streams (/v1/watch/workloads), one caller identity holds open at once (429 beyond)")
	fs.Uint64Var(&c.MaxLag, "max-admission-lag", 50000, "events admission may lag before submissions get 503 (0: never)")
	fs.BoolVar(&c.ManualClock, "manual-clock", false, "dev/test only: read the shared manual clock and serve POST /v1/debug/clock/advance")
	fs.BoolVar(&c.KubeBridge, "kube-bridge", false, "admit Kubernetes batch/v1 Jobs labelled kueue.x-k8s.io/queue-name (see docs/kubernetes.md)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file of --kube-bridge (empty: the in-cluster service account)")
	fs.IntVar(&c.Stream.Replicas, "stream-replicas", 1, "JQ_EVENTS replicas")
	c.Retention = &retention.Options{Snapshots: retention.DefaultSnapshots}
	fs.DurationVar(&c.Retention.Retention, "retention", retention.DefaultRetention,
		"how long a finished workload stays live before it expires, and how long an ended workload's events and a superseded configuration version stay in JQ_EVENTS after that (docs/retention.md)")
	fs.DurationVar(&c.Retention.HistoryRetention, "history-retention", retention.DefaultHistoryRetention,
		"how long PostgreSQL keeps an ended workload's row and events (docs/retention.md)")
	fs.DurationVar(&c.Retention.Interval, "retention-interval", retention.DefaultInterval, "time between two passes of the retention role")
	fs.Func("retention-snapshots", "comma-separated snapshot objects in JQ_SNAPSHOTS, one per decider, that JQ_EVENTS' purge waits for; with admission-0 listed, also every other admission shard JQ_SHARDS records (default "+
		strings.Join(retention.DefaultSnapshots, ",")+")", func(v string) error {
		c.Retention.Snapshots = strings.Split(v, ",")
		return nil
	})
	c.Submit = &SubmitLimits{}
	fs.Int64Var(&c.Submit.MaxMsgs, "submit-max-msgs", DefaultSubmitLimits.MaxMsgs, "most submissions waiting in JQ_SUBMIT; a publish beyond is refused")
	fs.Int64Var(&c.Submit.MaxBytes, "submit-max-bytes", DefaultSubmitLimits.MaxBytes, "most bytes waiting in JQ_SUBMIT; a publish beyond is refused")
	fs.Int64Var(&c.Submit.MaxMsgsPerNamespace, "submit-max-msgs-per-namespace", DefaultSubmitLimits.MaxMsgsPerNamespace, "most submissions of one namespace waiting in JQ_SUBMIT; its publish beyond is refused (docs/security.md)")
	fs.Int64Var(&c.Submit.MaxMsgSize, "submit-max-msg-size", DefaultSubmitLimits.MaxMsgSize, "largest durable submission accepted into JQ_SUBMIT, in bytes, headers included; a larger publish is refused")
	registerHeavyFlags(fs, c)
}
