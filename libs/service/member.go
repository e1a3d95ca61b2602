package service

import (
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/bus"
)

// RegisterMemberFlags declares the flags of a lease-holding service: the
// server, its shard (defaultShard) and identity in the lease, and the event
// stream's settings.
func RegisterMemberFlags(fs *flag.FlagSet, m *bus.Member, defaultShard string) {
	host, _ := os.Hostname()
	fs.StringVar(&m.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	RegisterIdentityFlags(fs, &m.Identity)
	fs.StringVar(&m.Shard, "shard", defaultShard, "the service's one shard, its lease key (any other value is refused: a second shard would decide the same quota twice)")
	fs.StringVar(&m.Instance, "instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's identity in the lease")
	fs.DurationVar(&m.LeaseTTL, "lease-ttl", bus.DefaultLeaseTTL, "how long a silent leader keeps the lease; the first service to create JQ_LEASES sets it for all")
	fs.IntVar(&m.Stream.Replicas, "stream-replicas", 1, "JQ_EVENTS replicas")
}
