// Package clock gives services their notion of now: the wall clock, or in
// dev and test mode one manual clock shared by every service through a
// JetStream KV key, moved only by an explicit advance (so scenarios with
// `advance` run end to end).
package clock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
)

// Start is where the manual clock starts, as in the simulator.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Bucket and key of the shared manual clock.
const (
	Bucket = "JQ_CLOCK"
	key    = "now"
)

// Manual is the shared manual clock. Now reads a local copy that a KV
// watch keeps current; Advance moves it for everyone.
type Manual struct {
	kv  jetstream.KeyValue
	mu  sync.RWMutex
	now time.Time
	// moved is closed (and replaced) whenever now moves.
	moved chan struct{}
}

// NewManual joins (or starts) the shared manual clock; it follows the key
// until ctx ends.
func NewManual(ctx context.Context, js jetstream.JetStream) (*Manual, error) {
	kv, err := bus.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		r, err := bus.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Replicas: r})
	})
	if err != nil {
		return nil, fmt.Errorf("clock bucket: %w", err)
	}
	if _, err := kv.Create(ctx, key, []byte(Start.Format(time.RFC3339Nano))); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("start the clock: %w", err)
	}
	m := &Manual{kv: kv, moved: make(chan struct{})}
	// Read the current time directly, then follow the key from its latest
	// value on: waiting for the watch's first delivery would hang a service
	// start on a slow server, and watching updates only would miss an
	// advance made between the read and the watch's start.
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read the clock: %w", err)
	}
	m.observe(e.Value())
	w, err := kv.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	go func() {
		defer w.Stop() //nolint:errcheck // the watch ends with ctx
		for e := range w.Updates() {
			if e != nil {
				m.observe(e.Value())
			}
		}
	}()
	return m, nil
}

// observe moves the local copy forward to a value read from the key.
func (m *Manual) observe(v []byte) {
	t, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return
	}
	m.mu.Lock()
	if t.After(m.now) {
		m.now = t
		close(m.moved)
		m.moved = make(chan struct{})
	}
	m.mu.Unlock()
}

// Await waits until the shared time, as this copy sees it, reaches t (an
// advance made by another participant may still be on its way here), or
// ctx ends; it returns the time then, which is never taken from t.
func (m *Manual) Await(ctx context.Context, t time.Time) time.Time {
	for {
		m.mu.RLock()
		now, moved := m.now, m.moved
		m.mu.RUnlock()
		if !now.Before(t) {
			return now
		}
		select {
		case <-ctx.Done():
			return now
		case <-moved:
		}
	}
}

// Now is the shared time as last seen.
func (m *Manual) Now() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.now
}

// Advance moves the shared clock forward by d and returns the new time.
// Concurrent advances add up: each is a compare-and-swap on the key.
func (m *Manual) Advance(ctx context.Context, d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("the clock only moves forward (got %s)", d)
	}
	var lastErr error
	for range 100 {
		e, err := m.kv.Get(ctx, key)
		if err != nil {
			return time.Time{}, err
		}
		cur, err := time.Parse(time.RFC3339Nano, string(e.Value()))
		if err != nil {
			return time.Time{}, err
		}
		next := cur.Add(d)
		_, lastErr = m.kv.Update(ctx, key, []byte(next.Format(time.RFC3339Nano)), e.Revision())
		if lastErr == nil {
			m.mu.Lock()
			if next.After(m.now) {
				m.now = next
			}
			m.mu.Unlock()
			return next, nil
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		// Another advance won the compare-and-swap: read again.
	}
	return time.Time{}, fmt.Errorf("advance the clock: %w", lastErr)
}
