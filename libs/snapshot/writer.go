package snapshot

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// RetryAfter is how long a failed snapshot waits before the next attempt.
const RetryAfter = 30 * time.Second

// Writer decides when a decider snapshots (its Policy) and writes one
// snapshot at a time in the background. The decider encodes its state on
// its own goroutine (the state is not shared) and hands Start the rest.
type Writer struct {
	Store  *Store
	Policy Policy
	// Wall is the clock of the policy's interval; nil means time.Now.
	Wall func() time.Time

	mu sync.Mutex
	// seq and at are the newest snapshot known (restored or written) and
	// when it was; busy while one is being written; failed when the last
	// attempt failed.
	seq    uint64
	at     time.Time
	busy   bool
	failed time.Time
	wg     sync.WaitGroup
}

func (w *Writer) now() time.Time {
	if w.Wall == nil {
		return time.Now()
	}
	return w.Wall()
}

// Due reports whether a snapshot of the state at seq is due now: the
// policy says so, none is being written, and the last attempt did not fail
// within RetryAfter.
func (w *Writer) Due(seq uint64) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.at.IsZero() {
		// The interval counts from the instance's start.
		w.at = now
	}
	if w.busy || (!w.failed.IsZero() && now.Sub(w.failed) < RetryAfter) {
		return false
	}
	return w.Policy.Due(seq, w.seq, now.Sub(w.at))
}

// Restored records the snapshot the decider started from.
func (w *Writer) Restored(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq = max(w.seq, seq)
}

// Start runs write in the background: it stores a snapshot and returns
// the sequence it reflects. A failure is logged, counted and retried
// after RetryAfter.
func (w *Writer) Start(write func() (uint64, error)) {
	w.mu.Lock()
	w.busy = true
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		seq, err := write()
		w.Done(seq, err)
	}()
}

// Done records the outcome of a snapshot attempt made without Start.
func (w *Writer) Done(seq uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	if err != nil {
		w.failed = w.now()
		w.Store.metrics.Failures.Inc()
		w.Store.log.Warn("snapshot not written", zap.String("object", Bucket+"/"+w.Store.name), zap.Error(err))
		return
	}
	w.failed = time.Time{}
	w.seq = max(w.seq, seq)
	w.at = w.now()
}

// Wait waits for the snapshot being written, if any.
func (w *Writer) Wait() { w.wg.Wait() }
