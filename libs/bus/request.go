package bus

import (
	"context"
	"math/rand/v2"
	"time"
)

// RequestTimeout bounds one request of a decider's loop to JetStream (a
// consumer's creation or info, a lease's read or write). Without a
// deadline of its own, a request waits for nats.go's default API timeout
// (5 s) and, sent to a server that has just died or frozen, or to a
// stream whose leader is gone, it waits all of it: the chaos-cluster
// suite measured 11-16 s from such a fault to the next admission, most
// of it spent waiting on one such request. A live server answers a
// request in milliseconds, even loaded; bounded by this, the request
// fails fast, and the next one, asked in place, goes over the
// connection's next server or to the stream's new leader. It is well
// under DefaultLeaseTTL, so a lease survives a failed renewal.
const RequestTimeout = 2 * time.Second

// Bounded is ctx limited to RequestTimeout, for one request.
func Bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, RequestTimeout)
}

// Backoff is the wait between requests asked again in place after a
// transient failure: short at first (a leader change settles in about a
// second), doubling up to a second, with jitter so that the instances of
// a service do not ask in lockstep. The zero value is ready to use.
type Backoff struct{ failures int }

// Next counts a failure and returns how long to wait before asking again.
func (b *Backoff) Next() time.Duration {
	wait := min(50*time.Millisecond<<min(b.failures, 5), time.Second)
	b.failures++
	return wait/2 + rand.N(wait/2+1)
}

// Reset starts the waits over after a success.
func (b *Backoff) Reset() { b.failures = 0 }

// Sleep waits d or until ctx ends, and reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
