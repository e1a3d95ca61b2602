package bus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Leadership is one instance's claim on a shard's lease: a standby keeps
// trying to acquire it, and the holder renews it in the background every
// third of the TTL, so that a long piece of work cannot let it lapse. A
// renewal that fails marks it lost.
type Leadership struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	ttl    time.Duration
	lease  *Lease
	lost   atomic.Bool
	stop   context.CancelFunc
}

// NewLeadership prepares a claim on the lease key for holder.
func NewLeadership(kv jetstream.KeyValue, key, holder string, ttl time.Duration) *Leadership {
	return &Leadership{kv: kv, key: key, holder: holder, ttl: ttl}
}

// Lead reports whether this instance holds the lease, acquiring it when
// free. It returns ErrLeaseLost once a held lease was lost; the caller
// must then drop whatever it did as the leader and call Lead again.
func (l *Leadership) Lead(ctx context.Context) (bool, error) {
	if l.lease != nil {
		if l.lost.Load() {
			l.stop()
			l.lease = nil
			return false, ErrLeaseLost
		}
		return true, nil
	}
	// Bounded, so that a standby asking a dead or frozen server learns it
	// within RequestTimeout and asks again (its caller does), rather than
	// after nats.go's 5 s: the time a takeover waited on it.
	actx, cancel := Bounded(ctx)
	lease, err := Acquire(actx, l.kv, l.key, l.holder)
	cancel()
	if errors.Is(err, ErrLeaseHeld) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.lease = lease
	l.lost.Store(false)
	rctx, cancel := context.WithCancel(ctx)
	l.stop = cancel
	go l.keep(rctx, lease)
	return true, nil
}

// Check is the fence before publishing as the leader: it returns nil
// only once the lease is read back as ours. A read that goes unanswered
// (a server gone, the bucket between leaders) is asked again, each
// bounded, for up to the TTL: within it the lease may well still be
// ours, and losing it would cost the leader a replay of the log. Any
// other failure, or none confirmed within the TTL, loses the lease: the
// next Lead starts over as a standby.
func (l *Leadership) Check(ctx context.Context) error {
	if l.lease == nil {
		return ErrLeaseLost
	}
	deadline := time.Now().Add(l.ttl)
	var b Backoff
	for {
		cctx, cancel := context.WithTimeout(ctx, l.attempt())
		err := l.lease.Check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Transient(err) || time.Now().After(deadline) || !Sleep(ctx, b.Next()) {
			l.lost.Store(true)
			return err
		}
	}
}

// attempt bounds one request about the lease: RequestTimeout, and no more
// than a renewal's period, so that a renewal that goes unanswered leaves
// time for another within the TTL.
func (l *Leadership) attempt() time.Duration {
	return min(RequestTimeout, l.ttl/3)
}

// Release gives the lease up, so that a standby takes over at once.
func (l *Leadership) Release() {
	if l.lease == nil {
		return
	}
	l.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.lease.Release(ctx)
	l.lease = nil
}

// keep renews the lease every third of the TTL. A renewal that goes
// unanswered is tried again at the next tick while the TTL since the last
// one stored has not run out: each is bounded by a third of the TTL, so
// that one asked of a dead or frozen server leaves room for another over
// the connection's next server. A refusal (the key taken or gone) loses
// the lease at once.
func (l *Leadership) keep(ctx context.Context, lease *Lease) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, l.attempt())
		err := lease.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			renewed = time.Now()
		case ctx.Err() != nil:
			return
		case !Transient(err) || time.Since(renewed) >= l.ttl:
			l.lost.Store(true)
			return
		}
	}
}

// Member is how a lease-holding service (admission, preemptor, podsready)
// joins the bus: the server, the event stream's settings, and its place in
// a shard, whose lease one member at a time holds.
type Member struct {
	NATSURL string
	// Identity is who the member is to NATS.
	Identity Identity
	Shard    string
	// Shards is how many shards the service runs (0 or 1: one). Only
	// admission partitions its work; the others run one shard.
	Shards   int
	Instance string
	LeaseTTL time.Duration
	Stream   StreamOptions
}

// DefaultLeaseTTL is how long a silent leader keeps its lease.
const DefaultLeaseTTL = 5 * time.Second

// TTL is the lease's time to live (DefaultLeaseTTL when unset).
func (m Member) TTL() time.Duration {
	if m.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return m.LeaseTTL
}

// Join opens the bus for a member and prepares its claim on the shard's
// lease. The lease lives by the bucket's TTL; a member configured with
// another is told so in the log.
func (m Member) Join(ctx context.Context, log *zap.Logger, service string) (*Conn, *Leadership, error) {
	if _, err := m.ShardIndex(service); err != nil {
		return nil, nil, ConfigError{err}
	}
	opts, err := m.Identity.Options()
	if err != nil {
		return nil, nil, err
	}
	conn, err := Open(ctx, m.NATSURL, service+"-"+m.Instance, m.Stream, opts...)
	if err != nil {
		return nil, nil, err
	}
	kv, ttl, err := EnsureLeaseBucket(ctx, conn.JS, m.TTL())
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if ttl != m.TTL() {
		log.Warn("the lease bucket's TTL differs from --lease-ttl; the bucket's holds (delete "+LeaseBucket+" to change it)",
			zap.Duration("bucket", ttl), zap.Duration("configured", m.TTL()))
	}
	return conn, NewLeadership(kv, m.Shard, m.Instance, ttl), nil
}

// ShardIndex is the member's shard number: --shard must be
// <service>-<i> with i below the shard count. A shard is a lease key: a
// second one of a service that does not partition its work would be a
// second leader deciding the whole log, so those run one shard.
func (m Member) ShardIndex(service string) (int, error) {
	n := max(m.Shards, 1)
	if n > MaxShards {
		return 0, fmt.Errorf("--shards %d: at most %d", n, MaxShards)
	}
	for i := range n {
		if m.Shard == ShardName(service, i) {
			return i, nil
		}
	}
	if n == 1 {
		return 0, fmt.Errorf("--shard %q: %s runs as one shard, %s (more replicas are standbys of it)", m.Shard, service, ShardName(service, 0))
	}
	return 0, fmt.Errorf("--shard %q: with --shards %d the shards are %s … %s", m.Shard, n, ShardName(service, 0), ShardName(service, n-1))
}

// ConfigError is a configuration no retry can cure: a service exits with
// it instead of starting its work again.
type ConfigError struct{ Err error }

func (e ConfigError) Error() string   { return e.Err.Error() }
func (e ConfigError) Unwrap() error   { return e.Err }
func (e ConfigError) Permanent() bool { return true }
