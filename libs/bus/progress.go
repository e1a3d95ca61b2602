package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProgressBucket records how far each consumer of JQ_EVENTS has read, so
// that /v1/sync can wait until every published event has been processed.
const ProgressBucket = "JQ_PROGRESS"

// Mark is one consumer's progress: the last stream sequence it processed
// (and published the consequences of). A consumer driven by the clock also
// says up to which time it has acted, and when it acts next, so that the
// manual clock can be stepped from one timer to the next.
type Mark struct {
	Seq   uint64     `json:"seq"`
	Clock *time.Time `json:"clock,omitempty"`
	Next  *time.Time `json:"next,omitempty"`
}

// Progress reports one consumer's marks.
type Progress struct {
	kv   jetstream.KeyValue
	name string
	last []byte
}

// NewProgress opens the progress bucket for the named consumer and, on
// its first start, marks it at sequence 0. /v1/sync waits only for the
// consumers that have a mark (one not deployed has none); a consumer that
// had not finished its first batch yet would otherwise not be waited
// for, and a sync could answer before, say, the first eviction it owes.
func NewProgress(ctx context.Context, js jetstream.JetStream, name string) (*Progress, error) {
	kv, err := progressBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	zero, err := json.Marshal(Mark{})
	if err != nil {
		return nil, err
	}
	if _, err := kv.Create(ctx, name, zero); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("register progress: %w", err)
	}
	return &Progress{kv: kv, name: name}, nil
}

func progressBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := Ensure(ctx, func() (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ProgressBucket, History: 1,
			Replicas: Replicas(ctx, js)})
	})
	if err != nil {
		return nil, fmt.Errorf("progress bucket: %w", err)
	}
	return kv, nil
}

// Report stores seq if it moved.
func (p *Progress) Report(ctx context.Context, seq uint64) error {
	return p.Mark(ctx, Mark{Seq: seq})
}

// Advance raises the stored sequence to seq if it is behind: a new leader
// takes over the position its predecessor acknowledged but may not have
// reported.
func (p *Progress) Advance(ctx context.Context, seq uint64) error {
	e, err := p.kv.Get(ctx, p.name)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("read progress: %w", err)
	}
	if err == nil {
		m, err := parseMark(e.Value())
		if err != nil {
			return err
		}
		if m.Seq >= seq {
			return nil
		}
	}
	return p.Report(ctx, seq)
}

// Mark stores a mark if it changed.
func (p *Progress) Mark(ctx context.Context, m Mark) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if string(v) == string(p.last) {
		return nil
	}
	if _, err := p.kv.Put(ctx, p.name, v); err != nil {
		return fmt.Errorf("report progress: %w", err)
	}
	p.last = v
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
	m, err := parseMark(e.Value())
	return m.Seq, err
}

// ReadMarks returns every consumer's mark by name.
func ReadMarks(ctx context.Context, js jetstream.JetStream) (map[string]Mark, error) {
	out := map[string]Mark{}
	kv, err := js.KeyValue(ctx, ProgressBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if out[k], err = parseMark(e.Value()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseMark reads a mark, or a bare sequence as written before marks.
func parseMark(v []byte) (Mark, error) {
	if seq, err := strconv.ParseUint(string(v), 10, 64); err == nil {
		return Mark{Seq: seq}, nil
	}
	var m Mark
	if err := json.Unmarshal(v, &m); err != nil {
		return m, fmt.Errorf("progress mark %q: %w", v, err)
	}
	return m, nil
}
