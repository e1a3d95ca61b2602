// Package retention keeps JQ_EVENTS and the projection from growing for
// ever without losing the truth. One instance acts at a time (the holder
// of the "retention" lease in JQ_LEASES; ingest hosts the role, next to
// the projection it reads). Each pass:
//
//	finished for --retention ──▶ WorkloadExpired (fenced on its subject):
//	                              every decider forgets it as if deleted
//	gate = min(every decider's snapshot (JQ_SNAPSHOTS, Jq-Seq),
//	           every consumer's progress, the projection's position)
//	ended (deleted or expired) at D, D <= gate, for --retention
//	                          ──▶ purge its subjects below D+1: whole
//	                              incarnations only, never part of one
//	a configuration object's latest version L <= gate, for --retention
//	                          ──▶ purge its subject below L: the latest
//	                              version of every object stays for ever
//	projection rows and events ended for --history-retention
//	                          ──▶ deleted from PostgreSQL
//
// Without the snapshot bucket or any expected snapshot, nothing is purged
// (expiry still runs: it is an event, which every decider applies).
// What the log still needs for live state is never purged: a live
// workload's events, configuration's latest versions, and anything a
// decider, consumer or the projection has not read yet.
package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// Names shared with the snapshot writer: the Object Store bucket of the
// deciders' snapshots, one object per decider ("<service>-<shard>"), and
// the metadata key holding the stream sequence a snapshot reflects.
const (
	SnapshotBucket = "JQ_SNAPSHOTS"
	SnapshotSeqKey = "Jq-Seq"
	// LeaseKey is the role's lease in JQ_LEASES.
	LeaseKey = "retention"
)

// Options are the operator's knobs (ingest's --retention* flags).
type Options struct {
	// Retention is how long a finished workload stays live before it
	// expires, and how long an ended workload's history and a
	// superseded configuration version stay in JQ_EVENTS after that.
	Retention time.Duration
	// HistoryRetention is how long the projection keeps an ended
	// workload's row and events.
	HistoryRetention time.Duration
	// Interval is the time between passes.
	Interval time.Duration
	// Snapshots names the snapshot objects every decider keeps in
	// SnapshotBucket; the purge waits for all of them.
	Snapshots []string
	// BatchSettle is how far (in event time) the gate must be past the
	// end of a history with batched events before it is purged; 0 means
	// DefaultBatchSettle. Not a flag: tests shorten it.
	BatchSettle time.Duration
}

// DefaultBatchSettle exceeds how long admission waits for a batch's
// members (10 s) and remembers a closed batch (1 min): by the time the
// gate is this far past a batch member, every member of its batch is at
// or below the gate, or the batch was closed in the log.
const DefaultBatchSettle = 2 * time.Minute

// Defaults of the flags.
const (
	DefaultRetention        = 7 * 24 * time.Hour
	DefaultHistoryRetention = 30 * 24 * time.Hour
	DefaultInterval         = time.Minute
)

// DefaultSnapshots are the objects of the deciders that replay JQ_EVENTS
// into memory.
var DefaultSnapshots = []string{"admission-0", "podsready-0"}

// Validate refuses knobs that make no sense, naming the flag.
func (o Options) Validate() error {
	for _, k := range []struct {
		flag string
		v    time.Duration
	}{{"--retention", o.Retention}, {"--history-retention", o.HistoryRetention}, {"--retention-interval", o.Interval}} {
		if k.v <= 0 {
			return fmt.Errorf("%s %s: must be positive", k.flag, k.v)
		}
	}
	if len(o.Snapshots) == 0 {
		return errors.New("--retention-snapshots: name at least one decider's snapshot")
	}
	for _, s := range o.Snapshots {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("--retention-snapshots %q: empty name", strings.Join(o.Snapshots, ","))
		}
	}
	return nil
}

// Config is the role's wiring.
type Config struct {
	Options
	JS     jetstream.JetStream
	Stream jetstream.Stream
	Store  *store.Store
	Leader *bus.Leadership
	Log    *zap.Logger
	// Now is the clock; nil means the wall clock.
	Now        func() time.Time
	Registerer prometheus.Registerer
}

// Retainer runs the passes.
type Retainer struct {
	cfg Config
	// cursor is the last ended event dealt with: every deletion or expiry
	// at or below it was purged from the log, or is kept on purpose.
	cursor  uint64
	metrics *metrics
	// blocked is why the last pass purged nothing ("" if it could).
	blocked string
}

type metrics struct {
	expired, purged, kept prometheus.Counter
	blocked               *prometheus.CounterVec
}

// New checks the options and prepares a retainer.
func New(cfg Config) (*Retainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchSettle <= 0 {
		cfg.BatchSettle = DefaultBatchSettle
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	m := &metrics{
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_retention_expired_total",
			Help: "Finished workloads expired (WorkloadExpired published)."}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_retention_purged_total",
			Help: "Ended workload histories and superseded configuration versions purged from JQ_EVENTS."}),
		kept: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_retention_kept_total",
			Help: "Passes whose purge stopped at an ended history with batched events the gate is not yet far enough past."}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_retention_blocked_total",
			Help: "Passes that purged nothing, by reason (no snapshot bucket, a snapshot missing or unreadable)."}, []string{"reason"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.expired, m.purged, m.kept, m.blocked} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return &Retainer{cfg: cfg, metrics: m}, nil
}

// Run passes every Interval while this instance holds the lease, until
// ctx ends.
func (r *Retainer) Run(ctx context.Context) error {
	defer r.cfg.Leader.Release()
	for {
		leading, err := r.cfg.Leader.Lead(ctx)
		switch {
		case errors.Is(err, bus.ErrLeaseLost):
			r.cursor = 0
		case err != nil && ctx.Err() == nil:
			return err
		case leading:
			if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
				if errors.Is(err, bus.ErrLeaseLost) {
					r.cursor = 0
				} else {
					r.cfg.Log.Warn("retention pass failed; trying again next interval", zap.Error(err))
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.Interval):
		}
	}
}

// Report is what one pass did.
type Report struct {
	Expired int
	// Gate is the highest sequence the purge could reach; Blocked says why
	// nothing was purged when it could not run.
	Gate    uint64
	Blocked string
	// Purged and Kept count ended workloads; Config counts configuration
	// objects whose older versions went.
	Purged, Kept, Config int
	History              store.Pruned
}

// Pass runs one pass (see the package comment).
func (r *Retainer) Pass(ctx context.Context) (Report, error) {
	var rep Report
	now := r.cfg.Now()
	cut := now.Add(-r.cfg.Retention)
	var err error
	if rep.Expired, err = r.expire(ctx, cut, now); err != nil {
		return rep, err
	}
	rep.Gate, rep.Blocked, err = r.gate(ctx)
	if err != nil {
		return rep, err
	}
	if rep.Blocked != "" {
		r.metrics.blocked.WithLabelValues(rep.Blocked).Inc()
		if rep.Blocked != r.blocked {
			r.cfg.Log.Info("JQ_EVENTS' purge waits for the deciders' snapshots", zap.String("reason", rep.Blocked),
				zap.String("bucket", SnapshotBucket), zap.Strings("snapshots", r.cfg.Snapshots))
		}
	} else {
		// Deciders replaying the log from here on know where it may have
		// holes before anything is purged.
		if err := bus.RaisePurgeFloor(ctx, r.cfg.JS, rep.Gate); err != nil {
			return rep, err
		}
		if rep.Purged, rep.Kept, err = r.purgeEnded(ctx, rep.Gate, cut); err != nil {
			return rep, err
		}
		if rep.Config, err = r.purgeConfig(ctx, rep.Gate, cut); err != nil {
			return rep, err
		}
	}
	r.blocked = rep.Blocked
	rep.History, err = r.cfg.Store.PruneHistory(ctx, now.Add(-r.cfg.HistoryRetention), r.cursor)
	return rep, err
}

// expireBatch bounds the expiries of one pass.
const expireBatch = 1000

// expire publishes WorkloadExpired for every workload that finished
// before cut and is still finished in the log, fenced on its subject so
// that anything that happened to it since wins.
func (r *Retainer) expire(ctx context.Context, cut, now time.Time) (int, error) {
	refs, err := r.cfg.Store.FinishedBefore(ctx, cut, expireBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range refs {
		subject := events.WorkloadSubject(ref.Namespace, ref.Name)
		h, err := r.history(ctx, subject, 0)
		if err != nil {
			return n, err
		}
		if !h.finished {
			continue
		}
		if err := r.cfg.Leader.Check(ctx); err != nil {
			return n, err
		}
		ev := events.Event{ID: fmt.Sprintf("retention/expire/%d/%s", h.last, subject), Type: events.WorkloadExpired,
			Source: events.SourceRetention, Time: now.UTC(), Subject: subject, Data: &ref}
		_, _, err = bus.Publish(ctx, r.cfg.JS, ev, &h.last)
		if errors.Is(err, bus.ErrConflict) {
			continue // it moved since: the next pass looks again
		}
		if err != nil {
			return n, err
		}
		n++
		r.metrics.expired.Inc()
	}
	return n, nil
}

// subjectHistory is what a workload subject holds up to a sequence.
type subjectHistory struct {
	// last is the last sequence on the subject (up to the bound).
	last uint64
	// finished says the live workload at last is finished.
	finished bool
	// batched says an event up to the bound belongs to a batch.
	batched bool
}

// history reads a workload subject's events, through `through` (0: all).
func (r *Retainer) history(ctx context.Context, subject string, through uint64) (subjectHistory, error) {
	var h subjectHistory
	for next := uint64(1); ; {
		m, err := r.cfg.Stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return h, nil
		}
		if err != nil {
			return h, fmt.Errorf("read %s: %w", subject, err)
		}
		if through > 0 && m.Sequence > through {
			return h, nil
		}
		h.last = m.Sequence
		if m.Header.Get(events.HeaderBatch) != "" {
			h.batched = true
		}
		switch t := events.Type(m.Header.Get(events.HeaderType)); {
		case t == events.WorkloadSubmitted || events.Ends(t):
			h.finished = false
		case t == events.WorkloadFinished:
			h.finished = true
		}
		next = m.Sequence + 1
	}
}

// snapshotNames are the snapshots the purge waits for: the configured
// ones and, when admission-0 is one of them, every other admission shard
// the cluster runs (its count is recorded in bus.ShardsBucket), each
// replaying the log from its own snapshot.
func (r *Retainer) snapshotNames(ctx context.Context) ([]string, error) {
	if !slices.Contains(r.cfg.Snapshots, "admission-0") {
		return r.cfg.Snapshots, nil
	}
	n, err := bus.ReadShardCount(ctx, r.cfg.JS, "admission")
	if err != nil {
		return nil, fmt.Errorf("admission's shard count: %w", err)
	}
	names := slices.Clone(r.cfg.Snapshots)
	for i := 1; i < n; i++ {
		if name := bus.ShardName("admission", i); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// gate is the highest sequence the purge may reach: no decider, consumer
// or the projection still needs anything at or below it. blocked is why
// there is none.
func (r *Retainer) gate(ctx context.Context) (gate uint64, blocked string, err error) {
	obs, err := r.cfg.JS.ObjectStore(ctx, SnapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, "no snapshot bucket", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("snapshot bucket: %w", err)
	}
	gate = ^uint64(0)
	names, err := r.snapshotNames(ctx)
	if err != nil {
		return 0, "", err
	}
	for _, name := range names {
		info, err := obs.GetInfo(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return 0, "snapshot missing", nil
		}
		if err != nil {
			return 0, "", fmt.Errorf("snapshot %s: %w", name, err)
		}
		seq, perr := strconv.ParseUint(info.Metadata[SnapshotSeqKey], 10, 64)
		if perr != nil || seq == 0 {
			return 0, "snapshot without a sequence", nil
		}
		gate = min(gate, seq)
	}
	marks, err := bus.ReadMarks(ctx, r.cfg.JS)
	if err != nil {
		return 0, "", fmt.Errorf("read progress: %w", err)
	}
	for _, m := range marks {
		gate = min(gate, m.Seq)
	}
	projected, err := r.cfg.Store.LastSeq(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("read the projection's position: %w", err)
	}
	gate = min(gate, projected)
	// Durable consumers (the scorer's) must have read it too.
	for name := range r.cfg.Stream.ConsumerNames(ctx).Name() {
		c, err := r.cfg.Stream.Consumer(ctx, name)
		if err != nil {
			continue // gone meanwhile
		}
		if c.CachedInfo().Config.Durable != "" {
			gate = min(gate, c.CachedInfo().AckFloor.Stream)
		}
	}
	return gate, "", nil
}

// purgeBatch bounds the ended workloads one query returns.
const purgeBatch = 500

// purgeEnded purges the histories of workloads that ended at or below
// gate before cut: each subject below its ending event, so that whole
// incarnations go and a later one under the same name stays whole.
//
// A history with an event in a batch (ce-jqbatch) waits until the gate is
// BatchSettle past its end: by then every other member of its batch is
// at or below the gate (so below the purge floor, where admission
// replaying the log releases a batch that lost members instead of
// waiting for them), or the batch was closed in the log.
func (r *Retainer) purgeEnded(ctx context.Context, gate uint64, cut time.Time) (purged, kept int, err error) {
	// Event times (ce-time) on both sides, the clock the ended events
	// were stamped with.
	gateTime, gateKnown, err := r.timeAt(ctx, gate)
	if err != nil {
		return 0, 0, err
	}
	for {
		ended, err := r.cfg.Store.EndedEvents(ctx, r.cursor, gate, purgeBatch)
		if err != nil || len(ended) == 0 {
			return purged, kept, err
		}
		for _, e := range ended {
			if !e.Time.Before(cut) {
				return purged, kept, nil
			}
			subject := events.WorkloadSubject(e.Namespace, e.Name)
			h, err := r.history(ctx, subject, e.Seq)
			if err != nil {
				return purged, kept, err
			}
			switch {
			case h.last == 0:
				// Purged already (an earlier pass, before a restart).
			case h.batched && (!gateKnown || gateTime.Before(e.Time.Add(r.cfg.BatchSettle))):
				// Not yet: the cursor stops here, and the next pass looks
				// again.
				kept++
				r.metrics.kept.Inc()
				return purged, kept, nil
			default:
				if err := r.cfg.Leader.Check(ctx); err != nil {
					return purged, kept, err
				}
				for _, s := range []string{subject, events.PlacedSubject(e.Namespace, e.Name)} {
					if err := r.cfg.Stream.Purge(ctx, jetstream.WithPurgeSubject(s), jetstream.WithPurgeSequence(e.Seq+1)); err != nil {
						return purged, kept, fmt.Errorf("purge %s below %d: %w", s, e.Seq+1, err)
					}
				}
				purged++
				r.metrics.purged.Inc()
			}
			r.cursor = e.Seq
		}
	}
}

// timeLookback bounds how far below a sequence timeAt looks for an event
// the stream still holds.
const timeLookback = 1000

// timeAt is the event time of the log at seq: that of the last event at
// or below it the stream still holds (seq itself may have been purged).
func (r *Retainer) timeAt(ctx context.Context, seq uint64) (time.Time, bool, error) {
	for s := seq; s > 0 && seq-s < timeLookback; s-- {
		m, err := r.cfg.Stream.GetMsg(ctx, s)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return time.Time{}, false, fmt.Errorf("read the event at %d: %w", s, err)
		}
		t, err := time.Parse(time.RFC3339Nano, m.Header.Get(events.HeaderTime))
		return t, err == nil, nil
	}
	return time.Time{}, false, nil
}

// purgeConfig drops every configuration object's versions older than its
// latest, once the latest is at or below gate and older than cut.
func (r *Retainer) purgeConfig(ctx context.Context, gate uint64, cut time.Time) (int, error) {
	info, err := r.cfg.Stream.Info(ctx, jetstream.WithSubjectFilter(events.SubjectRoot+".cfg.>"))
	if err != nil {
		return 0, fmt.Errorf("list configuration subjects: %w", err)
	}
	n := 0
	for subject, count := range info.State.Subjects {
		if count < 2 {
			continue
		}
		m, err := r.cfg.Stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("read %s: %w", subject, err)
		}
		if m.Sequence > gate || !m.Time.Before(cut) {
			continue
		}
		if err := r.cfg.Leader.Check(ctx); err != nil {
			return n, err
		}
		if err := r.cfg.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(m.Sequence)); err != nil {
			return n, fmt.Errorf("purge %s below %d: %w", subject, m.Sequence, err)
		}
		n++
		r.metrics.purged.Inc()
	}
	return n, nil
}
