package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// ProgressBucket records how far each consumer of JQ_EVENTS has read, so
// that /v1/sync can wait until every published event has been processed.
const ProgressBucket = "JQ_PROGRESS"

// Progress reports one consumer's last processed stream sequence.
type Progress struct {
	kv   jetstream.KeyValue
	name string
	last uint64
}

// NewProgress opens the progress bucket for the named consumer.
func NewProgress(ctx context.Context, js jetstream.JetStream, name string) (*Progress, error) {
	kv, err := Ensure(func() (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ProgressBucket, History: 1})
	})
	if err != nil {
		return nil, fmt.Errorf("progress bucket: %w", err)
	}
	return &Progress{kv: kv, name: name}, nil
}

// Report stores seq if it moved.
func (p *Progress) Report(ctx context.Context, seq uint64) error {
	if seq == p.last {
		return nil
	}
	if _, err := p.kv.Put(ctx, p.name, []byte(strconv.FormatUint(seq, 10))); err != nil {
		return fmt.Errorf("report progress: %w", err)
	}
	p.last = seq
	return nil
}

// ReadProgress returns a consumer's reported sequence (0 if none yet).
func ReadProgress(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	kv, err := js.KeyValue(ctx, ProgressBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}
