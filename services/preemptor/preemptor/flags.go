package preemptor

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	host, _ := os.Hostname()
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&c.Shard, "shard", "preemptor-0", "lease key of the shard this instance evicts for")
	fs.StringVar(&c.Instance, "instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's identity in the lease")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 5*time.Second, "how long a silent leader keeps the lease")
	fs.IntVar(&c.Stream.Replicas, "stream-replicas", 1, "JQ_EVENTS replicas")
	fs.DurationVar(&c.Stream.MaxAge, "stream-max-age", 0, "JQ_EVENTS retention (0: keep forever)")
}
