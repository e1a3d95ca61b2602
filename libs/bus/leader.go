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
	lease, err := Acquire(ctx, l.kv, l.key, l.holder)
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

// Check is the fence before publishing as the leader. A failed check
// loses the lease: the next Lead starts over as a standby.
func (l *Leadership) Check(ctx context.Context) error {
	if l.lease == nil {
		return ErrLeaseLost
	}
	err := l.lease.Check(ctx)
	if err != nil {
		l.lost.Store(true)
	}
	return err
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

func (l *Leadership) keep(ctx context.Context, lease *Lease) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := lease.Renew(ctx); err != nil {
				if ctx.Err() == nil {
					l.lost.Store(true)
				}
				return
			}
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
