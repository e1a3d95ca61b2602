package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket holds the single-active leases, one key per service shard.
const LeaseBucket = "JQ_LEASES"

// ErrLeaseHeld means another holder owns the lease.
var ErrLeaseHeld = errors.New("lease held by another instance")

// ErrLeaseLost means the lease expired or was taken: stop publishing.
var ErrLeaseLost = errors.New("lease lost")

// Lease is a JetStream-KV lease: the key exists while its holder renews it
// within the bucket's TTL, and every renewal is a compare-and-swap on the
// key's revision, so two holders can never both believe they hold it.
// Its methods may be called from several goroutines (a renewer and a
// publisher checking the fence).
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string

	mu       sync.Mutex
	revision uint64
	// unsure: the last renewal went unanswered, and may have been stored
	// all the same, at a revision we never learnt.
	unsure bool
}

// EnsureLeaseBucket creates the lease bucket with the lease TTL, or joins
// the existing one, and returns the TTL the bucket has. Every lease in it
// lapses after the bucket's TTL, so the first creator's TTL holds for all
// services: a holder must renew on it, not on its own setting, or a
// longer setting would let its lease lapse between renewals. (Updating
// the bucket instead would change every other holder's TTL under it.)
func EnsureLeaseBucket(ctx context.Context, js jetstream.JetStream, ttl time.Duration) (jetstream.KeyValue, time.Duration, error) {
	replicas, err := Replicas(ctx, js)
	if err != nil {
		return nil, 0, fmt.Errorf("ensure lease bucket: %w", err)
	}
	kv, err := Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := js.KeyValue(ctx, LeaseBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: ttl, History: 1, Replicas: replicas})
		}
		return kv, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("ensure lease bucket: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("lease bucket: %w", err)
	}
	// The bucket follows the event stream's replicas, as every bucket does.
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo().Config.Replicas != replicas {
		if kv, err = js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: st.TTL(), History: 1, Replicas: replicas}); err != nil {
			return nil, 0, fmt.Errorf("lease bucket replicas: %w", err)
		}
	}
	return kv, st.TTL(), nil
}

// Acquire takes the lease named key for holder, or returns ErrLeaseHeld.
func Acquire(ctx context.Context, kv jetstream.KeyValue, key, holder string) (*Lease, error) {
	rev, err := kv.Create(ctx, key, []byte(holder))
	if err == nil {
		return &Lease{kv: kv, key: key, holder: holder, revision: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	// A key deleted or purged leaves a marker; Create fails on it only
	// while a live value exists.
	entry, gerr := kv.Get(ctx, key)
	if gerr == nil && string(entry.Value()) == holder {
		l := &Lease{kv: kv, key: key, holder: holder, revision: entry.Revision()}
		return l, l.Renew(ctx)
	}
	return nil, fmt.Errorf("lease %s: %w", key, ErrLeaseHeld)
}

// Renew extends the lease; it must run well within the TTL.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rev, err := l.kv.Update(ctx, l.key, []byte(l.holder), l.revision)
	var api *jetstream.APIError
	if err != nil && l.unsure && errors.As(err, &api) &&
		(api.ErrorCode == codeWrongLastSequence || api.ErrorCode == codeWrongLastSequenceConstant) {
		// The unanswered renewal was stored. The key still naming this
		// holder is proof enough that no one took it since (a taker
		// writes its own name), as Acquire takes it back.
		if entry, gerr := l.kv.Get(ctx, l.key); gerr == nil && string(entry.Value()) == l.holder {
			rev, err = l.kv.Update(ctx, l.key, []byte(l.holder), entry.Revision())
		}
	}
	l.unsure = err != nil && Transient(err)
	if err != nil {
		return fmt.Errorf("renew lease %s: %w: %w", l.key, ErrLeaseLost, err)
	}
	l.revision = rev
	return nil
}

// Check is the fence before a publish: the lease must still be ours at the
// revision we last wrote.
func (l *Lease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	entry, err := l.kv.Get(ctx, l.key)
	if err != nil {
		// Not confirmed is lost, to the caller about to publish; the
		// cause goes with it, so that Leadership can tell a read that
		// went unanswered (asked again) from a key gone.
		return fmt.Errorf("lease %s: %w: %w", l.key, ErrLeaseLost, err)
	}
	if l.unsure && string(entry.Value()) == l.holder {
		// Our unanswered renewal was stored (see Renew): still ours.
		l.revision, l.unsure = entry.Revision(), false
	}
	if entry.Revision() != l.revision || string(entry.Value()) != l.holder {
		return fmt.Errorf("lease %s: %w", l.key, ErrLeaseLost)
	}
	return nil
}

// Release gives the lease up so a standby can take over at once.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.revision))
}
