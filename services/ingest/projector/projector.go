// Package projector keeps the PostgreSQL projection (libs/store) equal to
// the event log, JQ_EVENTS: every event reaches it exactly once, in
// stream order, whatever the number of ingest instances.
//
//	JQ_EVENTS ──ordered read from last_seq+1──▶ lease holder ──store.Apply (one transaction per batch)──▶ PostgreSQL
//	                                            standbys wait for the "projector" lease in JQ_LEASES
//
// The contract:
//
//   - One writer. Of all ingest instances, the one holding the
//     "projector" lease in JQ_LEASES reads and writes; the others stand by
//     and take over within the lease's TTL (at once when the holder stops
//     politely and releases it).
//   - Order. The writer reads the stream with an ordered consumer
//     starting at the projection's stored last_seq+1. The position lives
//     in PostgreSQL, written in the same transaction as the rows it
//     produced; there is no durable consumer whose acknowledgements could
//     disagree with it.
//   - The fence is the store's, not the lease. store.Apply accepts a batch
//     only if it continues the projection at last_seq+1 (a prefix already
//     applied is dropped). A writer that lost its lease without knowing
//     it, or a batch read before a rebuild, is refused with a
//     store.SequenceError and reads again from the stored position: it can
//     never write out of order, twice, or past a hole.
//   - Failures. A batch that fails because the database is unavailable is
//     retried, the same batch, with capped exponential backoff (100 ms
//     doubling to 5 s), for as long as it takes. Nothing is acknowledged
//     or skipped meanwhile.
//   - Gaps. JetStream sequences have holes where messages were removed
//     (the stream's limits expire the oldest, an operator deletes one).
//     A sequence the reader did not receive is passed over only when the
//     stream confirms it no longer holds it: the first message the stream
//     holds at or after it comes after it (one direct get, next by
//     subject), or, when nothing follows yet, it lies below the stream's
//     first sequence. Anything else is a read gone wrong: the reader is
//     dropped and the stream read again from the stored position.
//   - Parking. An event that does not decode, or whose content the
//     database refuses (store.Unstorable: a NUL jsonb cannot hold, a key
//     too long for its index), is parked: stored in parked_events with its
//     raw bytes and the reason, logged, counted in
//     jetqueue_events_skipped_total{type} and shown in /readyz (the
//     service runtime's Skip), and the projection moves past it. A batch
//     refused for its content is split in halves until the events at
//     fault are found, so one poison event costs a few transactions, never
//     the events around it.
//   - Rebuild. A request on Rebuild empties the projection (any instance
//     serves it, holder or standby); the writer's next batch is then out
//     of sequence and it reads the stream again from the start.
package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/store"
)

// LeaseKey is the projector's lease in JQ_LEASES.
const LeaseKey = "projector"

// Config is what a projector runs on.
type Config struct {
	// JS reads JQ_EVENTS; Stream is that stream.
	JS     jetstream.JetStream
	Stream jetstream.Stream
	Store  *store.Store
	// Leader is this instance's claim on LeaseKey.
	Leader *bus.Leadership
	Log    *zap.Logger
	// Skip records a parked event (service.Runtime.Skip); nil only logs.
	Skip func(seq uint64, typ string, err error)
	// Rebuild receives requests to drop the projection and replay the
	// stream; the answer goes on the request's channel, which must have
	// room for it.
	Rebuild <-chan chan error
	// Registerer takes the projector's metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Batch is the most events written in one transaction (default 1000).
	Batch int
	// MinBackoff and MaxBackoff bound the wait between retries of a failed
	// batch (default 100 ms and 5 s).
	MinBackoff, MaxBackoff time.Duration
	// Standby is how often a standby tries to take the lease (default 1 s).
	Standby time.Duration
}

// legacyDurable is the durable consumer earlier versions projected with;
// nothing reads it any more.
const legacyDurable = "projector"

// idleWait is how long a read waits for the next event when none is there.
const idleWait = 200 * time.Millisecond

type projector struct {
	cfg Config
	log *zap.Logger
	m   metrics
	// legacyGone: the old durable consumer was removed (or never was).
	legacyGone bool
}

type metrics struct {
	applied, failures prometheus.Counter
	position          prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_projection_events_applied_total",
			Help: "Events this instance wrote to the projection, projected or parked."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_projection_batch_failures_total",
			Help: "Projection batches that failed and were retried after a backoff."}),
		position: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetqueue_projection_last_seq",
			Help: "The last stream sequence this instance wrote to the projection."}),
	}
	if r != nil {
		r.MustRegister(m.applied, m.failures, m.position)
	}
	return m
}

// Run projects while this instance holds the lease and stands by while
// another does, until ctx ends. It returns nil then; neither the database
// nor NATS being away is a reason to stop.
func Run(ctx context.Context, cfg Config) error {
	if cfg.JS == nil || cfg.Stream == nil || cfg.Store == nil || cfg.Leader == nil {
		return errors.New("projector: JS, Stream, Store and Leader are required")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.Standby <= 0 {
		cfg.Standby = time.Second
	}
	p := &projector{cfg: cfg, log: cfg.Log.Named("projector"), m: newMetrics(cfg.Registerer)}
	defer cfg.Leader.Release()
	for ctx.Err() == nil {
		leading, err := cfg.Leader.Lead(ctx)
		if err != nil && !errors.Is(err, bus.ErrLeaseLost) && ctx.Err() == nil {
			p.log.Warn("cannot reach the projector's lease; standing by", zap.Error(err))
		}
		if leading {
			p.log.Info("projecting: this instance holds the lease")
			p.lead(ctx)
			continue
		}
		select {
		case <-ctx.Done():
		case done := <-cfg.Rebuild:
			p.rebuild(ctx, done)
		case <-time.After(cfg.Standby):
		}
	}
	return nil
}

// backoff is the schedule of waits between retries of one failed batch.
func (p *projector) backoff() *wait.Backoff {
	return &wait.Backoff{Duration: p.cfg.MinBackoff, Factor: 2, Cap: p.cfg.MaxBackoff, Steps: 1 << 30}
}

// lead is one term as the writer: consume → apply, in stream order, until
// the lease is lost or ctx ends. It holds at most one batch: the one read
// and not yet written, retried until it is written or refused.
func (p *projector) lead(ctx context.Context) {
	var r *reader
	var batch []entry
	delay := p.backoff()
	for ctx.Err() == nil {
		if leading, err := p.cfg.Leader.Lead(ctx); !leading || err != nil {
			p.log.Warn("the projector's lease is lost; standing by", zap.Error(err))
			return
		}
		select {
		case done := <-p.cfg.Rebuild:
			p.rebuild(ctx, done)
			r, batch = nil, nil
			continue
		default:
		}
		if r == nil {
			var err error
			if r, err = p.open(ctx); err != nil {
				p.retry(ctx, delay, "open the event stream", err)
				continue
			}
		}
		if batch == nil {
			var err error
			if batch, err = r.read(ctx); err != nil {
				p.log.Warn("reading the event stream failed; reading again from the projection's position", zap.Error(err))
				r, batch = nil, nil
				p.wait(ctx, delay.Step())
				continue
			}
			if len(batch) == 0 {
				batch = nil
				continue
			}
		}
		err := p.apply(ctx, batch)
		var seqErr *store.SequenceError
		switch {
		case err == nil:
			batch, delay = nil, p.backoff()
		case errors.As(err, &seqErr):
			// Someone else moved the projection (a rebuild, another
			// writer): read again from where it is.
			p.log.Info("batch out of sequence; reading again from the projection's position", zap.Error(err))
			r, batch = nil, nil
		default:
			p.retry(ctx, delay, "write a projection batch", err)
		}
	}
}

// retry logs a failure and waits the next step of its backoff.
func (p *projector) retry(ctx context.Context, delay *wait.Backoff, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	p.m.failures.Inc()
	d := delay.Step()
	p.log.Error("projector failed; retrying", zap.String("action", what), zap.Duration("in", d), zap.Error(err))
	p.wait(ctx, d)
}

func (p *projector) wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// rebuild empties the projection and answers the request.
func (p *projector) rebuild(ctx context.Context, done chan error) {
	err := p.cfg.Store.Reset(ctx)
	if err != nil {
		err = fmt.Errorf("drop the projection: %w", err)
	} else {
		p.log.Info("projection dropped; the writer replays the stream")
	}
	done <- err
}

// open positions a reader at the projection's stored last_seq+1. A
// projection ahead of the stream was built from another JQ_EVENTS (a new
// dev data directory, a recreated stream): it is emptied first, since the
// new stream's events would all be out of sequence.
func (p *projector) open(ctx context.Context) (*reader, error) {
	last, err := p.cfg.Store.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the projection's position: %w", err)
	}
	info, err := p.cfg.Stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	if last > info.State.LastSeq {
		p.log.Warn("the projection is ahead of the stream; rebuilding it", zap.Uint64("projection", last), zap.Uint64("stream", info.State.LastSeq))
		if err := p.cfg.Store.Reset(ctx); err != nil {
			return nil, fmt.Errorf("drop a projection of another stream: %w", err)
		}
		last = 0
	}
	if !p.legacyGone {
		err := p.cfg.Stream.DeleteConsumer(ctx, legacyDurable)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			p.log.Warn("cannot remove the old projector consumer", zap.Error(err))
		}
		p.legacyGone = err == nil || errors.Is(err, jetstream.ErrConsumerNotFound)
	}
	return newReader(ctx, p.cfg.JS, p.cfg.Stream, last+1, p.cfg.Batch)
}
