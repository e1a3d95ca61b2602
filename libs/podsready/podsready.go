// Package podsready holds the rules of KEP-349 (waitForPodsReady) as pure
// functions of the configuration and the time passed in: when an admitted
// workload times out, how long it waits before it is requeued, and when it
// is deactivated instead.
package podsready

import (
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
)

// Config is a defaulted, validated waitForPodsReady block.
type Config struct {
	Enable         bool
	Timeout        time.Duration
	BlockAdmission bool
	// ByEviction orders a timed-out workload by its eviction time rather
	// than its creation time.
	ByEviction bool
	// BackoffLimit is how many requeues are allowed; nil is unlimited.
	BackoffLimit *int32
	BackoffBase  time.Duration
	BackoffMax   time.Duration
}

// FromAPI reads a defaulted Configuration; nil or a missing block means
// disabled.
func FromAPI(c *api.Configuration) Config {
	if c == nil || c.WaitForPodsReady == nil || !c.WaitForPodsReady.Enable {
		return Config{}
	}
	w := c.WaitForPodsReady
	cfg := Config{
		Enable:      true,
		Timeout:     api.DefaultPodsReadyTimeout,
		BackoffBase: api.DefaultBackoffBaseSeconds * time.Second,
		BackoffMax:  api.DefaultBackoffMaxSeconds * time.Second,
		ByEviction:  true,
	}
	cfg.BlockAdmission = w.BlockAdmission == nil || *w.BlockAdmission
	if w.Timeout != nil {
		cfg.Timeout = w.Timeout.Duration
	}
	if r := w.RequeuingStrategy; r != nil {
		if r.Timestamp != nil {
			cfg.ByEviction = *r.Timestamp == api.RequeueByEviction
		}
		cfg.BackoffLimit = r.BackoffLimitCount
		if r.BackoffBaseSeconds != nil {
			cfg.BackoffBase = time.Duration(*r.BackoffBaseSeconds) * time.Second
		}
		if r.BackoffMaxSeconds != nil {
			cfg.BackoffMax = time.Duration(*r.BackoffMaxSeconds) * time.Second
		}
	}
	return cfg
}

// Backoff is the wait before the n-th requeue (n >= 1): base × 2^(n−1),
// capped at the maximum; a maximum of 0 means no cap (as wait.Backoff's
// Cap, which Kueue uses), and the wait then stops growing at a century so
// that it never overflows. No jitter, so replays are identical.
func (c Config) Backoff(n int32) time.Duration {
	const ceiling = 100 * 365 * 24 * time.Hour
	limit := c.BackoffMax
	if limit <= 0 {
		limit = ceiling
	}
	d := c.BackoffBase
	for i := int32(1); i < n; i++ {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// Deadline is when a workload admitted at admittedAt times out if its pods
// are not ready (inclusive).
func (c Config) Deadline(admittedAt time.Time) time.Time {
	return admittedAt.Add(c.Timeout)
}

// Timeout is the decision for a workload that reached its deadline.
type Timeout struct {
	// Deactivate: the requeue budget is spent; the workload becomes
	// inactive and releases its quota for good.
	Deactivate bool
	// Count is the new requeue count, and RequeueAt when it may be tried
	// again; both unset when deactivated.
	Count     int32
	RequeueAt time.Time
}

// OnTimeout decides what happens to a workload that was requeued count
// times before and timed out at now.
func (c Config) OnTimeout(count int32, now time.Time) Timeout {
	n := count + 1
	if c.BackoffLimit != nil && n > *c.BackoffLimit {
		return Timeout{Deactivate: true}
	}
	return Timeout{Count: n, RequeueAt: now.Add(c.Backoff(n))}
}
