package scorer

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// NodesBucket is the JetStream KV bucket of node states, for clusters
// without Kubernetes and for tests; `jqctl nodes put` writes it.
const NodesBucket = events.NodesBucket

// NodeKey is the bucket key of a node; the value is a scoring.NodeState
// in JSON. Whatever runs the pods keeps requested current; the scorer only
// reads it.
func NodeKey(name string) string { return events.Token(name) }

// NodesKV opens NodesBucket, creating it when it does not exist; an
// existing bucket's configuration is left as its operator made it.
func NodesKV(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, NodesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		var replicas int
		if replicas, err = bus.Replicas(ctx, js); err != nil {
			return nil, err
		}
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: NodesBucket,
			Description: "jetqueue node states for the scorer", History: 1, Replicas: replicas})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, NodesBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", NodesBucket, err)
	}
	return kv, nil
}

// runKV keeps inv in step with the bucket: it watches every key, marks the
// inventory synced once the initial values are in, and returns when ctx
// ends. A value that does not decode removes its node (a stale state would
// be worse than none) and is logged.
func runKV(ctx context.Context, kv jetstream.KeyValue, inv *Inventory, log *zap.Logger) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", NodesBucket, err)
	}
	defer w.Stop() //nolint:errcheck // best effort on the way out
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watch bucket %s: closed", NodesBucket)
			}
			if e == nil {
				inv.markSynced()
				continue
			}
			applyKV(inv, e.Key(), e.Operation(), e.Value(), log)
		}
	}
}

func applyKV(inv *Inventory, key string, op jetstream.KeyValueOp, value []byte, log *zap.Logger) {
	if op != jetstream.KeyValuePut {
		inv.remove(key)
		return
	}
	s, err := scoring.DecodeNodeState(value)
	if err != nil {
		log.Warn("node state does not decode; node dropped", zap.String("key", key), zap.Error(err))
		inv.remove(key)
		return
	}
	inv.put(key, s.Node())
}
