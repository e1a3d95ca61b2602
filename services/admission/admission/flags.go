package admission

import (
	"flag"
	"time"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	service.RegisterMemberFlags(fs, &c.Member, "admission-0")
	fs.Lookup("shard").Usage = "this instance's shard, its lease key: admission-<i> with i below --shards (replicas of one shard are standbys of it)"
	fs.IntVar(&c.Shards, "shards", 1, "how many shards admission runs, each deciding the cohort trees FNV-1a of the cohort's name (a standalone ClusterQueue's) modulo this number gives it; the same on every instance (the first records it in JQ_SHARDS), at most 64")
	fs.BoolVar(&c.ManualClock, "manual-clock", false, "dev/test only: read the shared manual clock")
	c.Snapshot = snapshot.DefaultPolicy
	fs.Uint64Var(&c.Snapshot.Events, "snapshot-events", snapshot.DefaultPolicy.Events, "snapshot the state to JQ_SNAPSHOTS once this many events were read since the last one (0: not by count)")
	fs.DurationVar(&c.Snapshot.Interval, "snapshot-interval", snapshot.DefaultPolicy.Interval, "snapshot the state to JQ_SNAPSHOTS once this long has passed since the last one, if any event came (0: not by time)")
	fs.DurationVar(&c.MaxSkew, "max-skew", time.Second, "how far ahead of this clock the latest event read may stamp a decision; an event's time never moves the clock further")
}
