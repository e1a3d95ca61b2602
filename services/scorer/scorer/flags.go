package scorer

import (
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// RegisterFlags declares the service's flags; each also reads JQ_<NAME>.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	host, _ := os.Hostname()
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	service.RegisterIdentityFlags(fs, &c.NATS)
	fs.StringVar(&c.Instance, "instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's identity (NATS connection name)")
	fs.StringVar(&c.Inventory, "inventory", InventoryKV, "where node states come from: kv (the "+NodesBucket+" bucket, written by jqctl nodes put) or kubernetes (informers on Nodes and Pods)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file for --inventory=kubernetes (empty: the in-cluster service account)")
	fs.StringVar(&c.Scoring.File, "config", "", "scoring configuration file, YAML or JSON: a KubeSchedulerConfiguration whose profile configures NodeResourcesFitPlus and ScarceResourceAvoidance, or their args documents (kind ResourceTypesArgs, ScarceResourceAvoidanceArgs)")
	fs.StringVar(&c.Scoring.SchedulerName, "scheduler-name", "", "profile to read from a --config with several")
	fs.StringVar(&c.Scoring.FitPlus, "fit-plus", "", "NodeResourcesFitPlus resources without --config: name=MostAllocated|LeastAllocated[:weight],... (default "+DefaultFitPlus+")")
	fs.StringVar(&c.Scoring.Scarce, "scarce-resources", "", "ScarceResourceAvoidance resources without --config: name,... or none (default "+DefaultScarce+")")
	fs.Int64Var(&c.Scoring.FitPlusWeight, "fit-plus-weight", 0, "score weight of NodeResourcesFitPlus (0: the --config's, else 1)")
	fs.Int64Var(&c.Scoring.ScarceWeight, "scarce-weight", 0, "score weight of ScarceResourceAvoidance (0: the --config's, else 1)")
	fs.IntVar(&c.Stream.Replicas, "stream-replicas", 1, "JQ_EVENTS replicas")
	c.Snapshot = snapshot.DefaultPolicy
	fs.Uint64Var(&c.Snapshot.Events, "snapshot-events", snapshot.DefaultPolicy.Events, "snapshot the state to JQ_SNAPSHOTS once this many events were read since the last one (0: not by count)")
	fs.DurationVar(&c.Snapshot.Interval, "snapshot-interval", snapshot.DefaultPolicy.Interval, "snapshot the state to JQ_SNAPSHOTS once this long has passed since the last one, if any event came (0: not by time)")
}
