package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// Progress reports one consumer's marks. Mark hands the newest mark to a
// writer goroutine and returns: a consumer reports after every step, and
// under a steady load of 1,000 workloads a second admission, the
// preemptor and podsready together stepped 1,200 times a second, each
// waiting for a KV put's acknowledgement before reading on (as many puts
// as 60% of the events). The writer stores the newest mark at once when
// the last put is progressEvery old, else when it is; a mark is never
// stored before the step it reports has published, so /v1/sync, which
// waits for the marks, answers no earlier than before (at most
// progressEvery later under load).
type Progress struct {
	kv   jetstream.KeyValue
	name string

	mu sync.Mutex
	// written is the last mark stored; next the newest not stored yet
	// (nil when none); err the failure of a put, returned by the next
	// Mark or Flush; at when the last put started; idle is closed when
	// the running writer exits (nil when none runs).
	written, next []byte
	err           error
	at            time.Time
	idle          chan struct{}
}

// progressEvery is the least time between two puts of one consumer's
// mark, and progressTimeout bounds one put.
const (
	progressEvery   = 20 * time.Millisecond
	progressTimeout = 10 * time.Second
)

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
	kv, err := Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		r, err := Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ProgressBucket, History: 1, Replicas: r})
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
// reported. It returns once the mark is stored.
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
	if err := p.Report(ctx, seq); err != nil {
		return err
	}
	return p.Flush(ctx)
}

// Mark has a mark stored if it changed (see Progress). It returns the
// failure of an earlier put, if one failed since the last call.
func (p *Progress) Mark(_ context.Context, m Mark) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.takeErr(); err != nil {
		return err
	}
	cur := p.next
	if cur == nil {
		cur = p.written
	}
	if string(v) == string(cur) {
		return nil
	}
	p.next = v
	p.startWriter()
	return nil
}

// Flush waits until every mark handed over is stored, and returns the
// failure of a put if one failed.
func (p *Progress) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		if err := p.takeErr(); err != nil {
			p.mu.Unlock()
			return err
		}
		if p.next != nil {
			p.startWriter()
		}
		idle := p.idle
		p.mu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("report progress: %w", ctx.Err())
		}
	}
}

// Stop waits a little (two seconds at most) for the marks handed over to
// be stored: a consumer stopping on purpose leaves its last mark behind.
func (p *Progress) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.Flush(ctx)
}

// takeErr returns and clears the failure of a put; p.mu is held.
func (p *Progress) takeErr() error {
	err := p.err
	p.err = nil
	if err != nil {
		return fmt.Errorf("report progress: %w", err)
	}
	return nil
}

// startWriter starts the writer unless it runs; p.mu is held.
func (p *Progress) startWriter() {
	if p.idle == nil {
		p.idle = make(chan struct{})
		go p.write(p.idle)
	}
}

// write stores the newest mark until none is left, at most one put every
// progressEvery; it stops at a failed put, leaving the mark for the next
// writer.
func (p *Progress) write(idle chan struct{}) {
	defer close(idle)
	for {
		p.mu.Lock()
		v, wait := p.next, time.Until(p.at.Add(progressEvery))
		if v == nil || p.err != nil {
			p.idle = nil
			p.mu.Unlock()
			return
		}
		if wait > 0 {
			p.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		p.next, p.at = nil, time.Now()
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
		_, err := p.kv.Put(ctx, p.name, v)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.err = err
			if p.next == nil {
				p.next = v
			}
		} else {
			p.written = v
		}
		p.mu.Unlock()
	}
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
//
// The names are the subjects the bucket's stream holds, read from the
// stream's state: each key keeps one message (History 1) that a put
// replaces at once, so every key is there whenever the state is read.
// (The KV's own listing, a watcher over the last message per key, misses a
// key whose message is replaced while it lists: under load it left out
// admission's mark in about one reading in seven.)
func ReadMarks(ctx context.Context, js jetstream.JetStream) (map[string]Mark, error) {
	out := map[string]Mark{}
	kv, err := js.KeyValue(ctx, ProgressBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, "KV_"+ProgressBucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + ProgressBucket + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	for subject := range info.State.Subjects {
		k := strings.TrimPrefix(subject, prefix)
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
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
