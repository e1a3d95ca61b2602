package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// RetentionBucket is the KV bucket of the retention role's state that
// the deciders read: the purge floor.
const RetentionBucket = "JQ_RETENTION"

// floorKey holds the purge floor.
const floorKey = "purge-floor"

// PurgeFloor is the highest sequence below which the retention role may
// have purged JQ_EVENTS (0: it never purged). Below it the log may have
// holes: a batch whose members were purged never completes there, and a
// decider replaying it releases such a batch instead of waiting for it.
func PurgeFloor(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	kv, err := js.KeyValue(ctx, RetentionBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("retention bucket: %w", err)
	}
	e, err := kv.Get(ctx, floorKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the purge floor: %w", err)
	}
	seq, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("purge floor %q: %w", e.Value(), err)
	}
	return seq, nil
}

// RaisePurgeFloor records that purges may reach seq: the retention role
// calls it before purging. The floor never goes down.
func RaisePurgeFloor(ctx context.Context, js jetstream.JetStream, seq uint64) error {
	kv, err := Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		r, err := Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RetentionBucket, History: 1, Replicas: r})
	})
	if err != nil {
		return fmt.Errorf("retention bucket: %w", err)
	}
	for {
		var rev uint64
		e, err := kv.Get(ctx, floorKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read the purge floor: %w", err)
		default:
			cur, perr := strconv.ParseUint(string(e.Value()), 10, 64)
			if perr == nil && cur >= seq {
				return nil
			}
			rev = e.Revision()
		}
		v := []byte(strconv.FormatUint(seq, 10))
		if rev == 0 {
			_, err = kv.Create(ctx, floorKey, v)
		} else {
			_, err = kv.Update(ctx, floorKey, v, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
				return fmt.Errorf("raise the purge floor: %w", err)
			}
		}
		// Someone else moved it: read again.
	}
}
