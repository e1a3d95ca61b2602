package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// ShardsBucket records, per sharded service, the shard count the cluster
// runs with. Who owns a cohort tree is a function of that count (see
// engine.TreeOwner), so two instances that disagree on it would both
// decide some trees: the first instance records it, once, and every later
// one must agree.
const ShardsBucket = "JQ_SHARDS"

// MaxShards bounds --shards.
const MaxShards = 64

// RecordShardCount records n as service's shard count if none is
// recorded, and refuses an n that differs from the recorded one.
func RecordShardCount(ctx context.Context, js jetstream.JetStream, service string, n int) error {
	kv, err := Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		r, err := Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ShardsBucket, History: 1, Replicas: r})
	})
	if err != nil {
		return fmt.Errorf("shards bucket: %w", err)
	}
	if _, err := kv.Create(ctx, service, []byte(strconv.Itoa(n))); err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
		if err != nil {
			return fmt.Errorf("record the shard count: %w", err)
		}
		return nil
	}
	e, err := kv.Get(ctx, service)
	if err != nil {
		return fmt.Errorf("read the shard count: %w", err)
	}
	recorded, err := strconv.Atoi(string(e.Value()))
	if err != nil {
		return fmt.Errorf("%s key %s: %q is no shard count", ShardsBucket, service, e.Value())
	}
	if recorded != n {
		return ConfigError{fmt.Errorf("--shards %d: the cluster's %s runs with %d shards (recorded in %s key %s); every instance must use the same count. To change it, stop every %s instance and delete that key",
			n, service, recorded, ShardsBucket, service, service)}
	}
	return nil
}

// ReadShardCount returns service's recorded shard count, 1 if none.
func ReadShardCount(ctx context.Context, js jetstream.JetStream, service string) (int, error) {
	kv, err := js.KeyValue(ctx, ShardsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, service)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil || n < 1 || n > MaxShards {
		return 0, fmt.Errorf("%s key %s: %q is no shard count", ShardsBucket, service, e.Value())
	}
	return n, nil
}

// ShardName is the lease key (and snapshot object) of shard i.
func ShardName(service string, i int) string { return service + "-" + strconv.Itoa(i) }

// ProgressName is the progress mark of a service's shard i: the service's
// name for shard 0 (as with one shard), "<service>-<i>" for the others.
func ProgressName(service string, i int) string {
	if i == 0 {
		return service
	}
	return ShardName(service, i)
}
