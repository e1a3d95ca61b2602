// Package admission is the admission service's shell around the decision
// core. Its loop:
//
//	consume JQ_EVENTS in order ─▶ apply each event to the engine
//	      ▲                             │ (caught up with the stream)
//	      │                             ▼
//	      └──── publish decisions ◀─ run scheduling to quiescence
//
// Every instance follows the whole stream from the start (an ordered
// consumer), so a standby is hot; only the holder of the shard's lease
// decides and publishes. Decisions are applied to the engine when made and
// published fenced on the workload's subject (Nats-Expected-Last-Subject-
// Sequence): if another writer moved the workload first, the decision is
// taken back and made again on the new state. When an instance reads its
// own decisions back it skips them; decisions it did not make (a previous
// leader's, or its own from before a restart) are applied as facts and
// never decided again.
package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/clock"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/service"
)

// Config is the service's configuration.
type Config struct {
	NATSURL  string
	Shard    string
	Instance string
	LeaseTTL time.Duration
	Stream   bus.StreamOptions
	// Now is the clock; nil means the wall clock.
	Now func() time.Time
	// ManualClock reads the shared manual clock instead (dev and test).
	ManualClock bool
}

// Service is one admission instance.
type Service struct {
	cfg    Config
	log    *zap.Logger
	js     jetstream.JetStream
	eng    *engine.Engine
	kv     jetstream.KeyValue
	lease  *bus.Lease
	lost   atomic.Bool
	last   uint64
	onSubj map[string]uint64
	mine   map[string]bool
	batch  int
	// open counts the workloads still to come of each batch submission,
	// with when the batch was first seen: decisions wait for whole batches.
	open map[string]*openBatch
	// progress publishes how far this instance has read, for /v1/sync.
	progress *bus.Progress
}

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 5 * time.Second
	}
	conn, err := bus.Open(ctx, cfg.NATSURL, "admission-"+cfg.Instance, cfg.Stream)
	if err != nil {
		return err
	}
	defer conn.Close()
	js := conn.JS
	if cfg.ManualClock {
		m, err := clock.NewManual(ctx, js)
		if err != nil {
			return err
		}
		cfg.Now = m.Now
	}
	kv, err := bus.EnsureLeaseBucket(ctx, js, cfg.LeaseTTL)
	if err != nil {
		return err
	}
	s := &Service{cfg: cfg, log: rt.Log, js: js, kv: kv, batch: 512}
	if s.progress, err = bus.NewProgress(ctx, js, "admission"); err != nil {
		return err
	}
	defer s.releaseLease()
	for ctx.Err() == nil {
		err := s.follow(ctx, rt)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, bus.ErrLeaseLost) {
			return err
		}
		// Decisions applied in memory may never have been published: start
		// over from the log as a standby.
		s.log.Warn("lease lost; replaying the log as a standby", zap.Error(err))
		s.lease = nil
	}
	return nil
}

// follow replays the stream from the start into a fresh engine, then keeps
// following it, deciding while it holds the lease.
func (s *Service) follow(ctx context.Context, rt *service.Runtime) error {
	s.eng = engine.New()
	s.eng.RecordDecisions()
	s.onSubj, s.mine, s.last, s.open = map[string]uint64{}, map[string]bool{}, 0, map[string]*openBatch{}
	cons, err := s.js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("follow %s: %w", events.Stream, err)
	}
	for ctx.Err() == nil {
		if err := s.step(ctx, rt, cons); err != nil {
			return err
		}
	}
	return nil
}

// step consumes what is available and, once caught up, decides.
func (s *Service) step(ctx context.Context, rt *service.Runtime, cons jetstream.Consumer) error {
	caughtUp, err := s.consume(ctx, cons)
	if err != nil || !caughtUp {
		return err
	}
	rt.SetReady(true)
	if s.waitForBatches() {
		return nil
	}
	if err := s.lead(ctx); err != nil {
		return err
	}
	if s.lease != nil {
		if err := s.decide(ctx); err != nil {
			return err
		}
	}
	return s.progress.Report(ctx, s.last)
}

// consume applies the next batch of events and reports whether the
// instance has caught up with the stream.
func (s *Service) consume(ctx context.Context, cons jetstream.Consumer) (bool, error) {
	msgs, err := bus.Batch(ctx, cons, s.batch, 200*time.Millisecond)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("fetch: %w", err)
	}
	var pending uint64
	n := 0
	for _, msg := range msgs {
		n++
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		pending = meta.NumPending
		s.last = meta.Sequence.Stream
		s.onSubj[msg.Subject()] = meta.Sequence.Stream
		ev, err := bus.Decode(msg)
		if err != nil {
			s.log.Warn("skipping an event that does not decode", zap.Uint64("seq", s.last), zap.Error(err))
			continue
		}
		if s.mine[ev.ID] {
			delete(s.mine, ev.ID)
			continue
		}
		if ev.Batch != nil {
			s.batchMember(ev.Batch)
		}
		if err := s.apply(ev); err != nil {
			s.log.Warn("event not applied", zap.Uint64("seq", s.last), zap.String("type", string(ev.Type)), zap.Error(err))
		}
	}
	return n == 0 || pending == 0, nil
}

// apply folds one event into the engine. Errors are events the engine
// refuses (an unknown workload, say), logged and skipped: the log is the
// truth and never rewritten.
func (s *Service) apply(ev events.Event) error {
	now := ev.Time
	key := func(r events.WorkloadRef) string { return api.NamespacedName(r.Namespace, r.Name) }
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		objs, err := api.Decode(d.Object)
		if err != nil || len(objs) != 1 {
			return fmt.Errorf("config object: %v", err)
		}
		_, err = s.eng.Apply(objs[0], now)
		return err
	case *events.ConfigRef:
		return s.eng.DeleteConfig(d.Kind, d.Namespace, d.Name, now)
	case *events.WorkloadSubmittedData:
		objs, err := api.Decode(d.Workload)
		if err != nil || len(objs) != 1 {
			return fmt.Errorf("workload: %v", err)
		}
		wl, ok := objs[0].(*api.Workload)
		if !ok {
			return fmt.Errorf("workload payload is a %T", objs[0])
		}
		_, err = s.eng.Submit(wl, d.CreatedAt)
		return err
	case *events.PriorityChangedData:
		return s.eng.SetPriority(key(d.WorkloadRef), d.Priority, now)
	case *events.WorkloadFinishedData:
		return s.eng.Finish(key(d.WorkloadRef), now)
	case *events.QuotaReservedData:
		s.eng.ApplyAdmission(key(d.WorkloadRef), d.Admission, now)
	case *events.InadmissibleData:
		s.eng.NoteReason(key(d.WorkloadRef), d.Reason)
	case *events.EvictedData:
		s.eng.ApplyEviction(key(d.WorkloadRef), engine.Eviction{Reason: d.Reason, Kind: d.Kind, PreemptorCQ: d.PreemptorCQ}, now)
	case *events.WorkloadRef:
		switch ev.Type {
		case events.WorkloadDeleted:
			return s.eng.Delete(key(*d), now)
		case events.PodsReady:
			return s.eng.PodsReady(key(*d))
		}
	}
	return nil
}

type openBatch struct {
	missing int
	since   time.Time
}

// batchMaxWait bounds how long an incomplete batch holds decisions back:
// only an ingest that died mid-batch leaves one incomplete.
const batchMaxWait = 10 * time.Second

func (s *Service) batchMember(b *events.Batch) {
	ob := s.open[b.ID]
	if ob == nil {
		ob = &openBatch{missing: b.Size, since: time.Now()}
		s.open[b.ID] = ob
	}
	if ob.missing--; ob.missing <= 0 {
		delete(s.open, b.ID)
	}
}

// waitForBatches reports whether a batch submission is still arriving, so
// that its workloads are considered in the same cycle.
func (s *Service) waitForBatches() bool {
	for id, ob := range s.open {
		if time.Since(ob.since) > batchMaxWait {
			s.log.Warn("batch incomplete; deciding without the rest", zap.String("batch", id), zap.Int("missing", ob.missing))
			delete(s.open, id)
		}
	}
	return len(s.open) > 0
}

// lead acquires the shard's lease when free; a standby keeps trying. The
// lease is renewed in the background, so a long cycle cannot let it lapse;
// a renewal that fails marks it lost.
func (s *Service) lead(ctx context.Context) error {
	if s.lease != nil {
		if s.lost.Load() {
			return fmt.Errorf("admission %s: %w", s.cfg.Instance, bus.ErrLeaseLost)
		}
		return nil
	}
	l, err := bus.Acquire(ctx, s.kv, s.cfg.Shard, s.cfg.Instance)
	if errors.Is(err, bus.ErrLeaseHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("leading", zap.String("shard", s.cfg.Shard))
	s.lease = l
	s.lost.Store(false)
	go s.keep(ctx, l)
	return nil
}

// keep renews the lease every third of its TTL until it fails or ctx ends.
func (s *Service) keep(ctx context.Context, l *bus.Lease) {
	t := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Renew(ctx); err != nil {
				if ctx.Err() == nil {
					s.lost.Store(true)
				}
				return
			}
		}
	}
}

func (s *Service) releaseLease() {
	if s.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.lease.Release(ctx)
	}
}

// decide runs scheduling to quiescence and publishes what it decided. The
// lease is checked once before the batch; the decisions go out
// asynchronously (one round trip for the batch), in order, each fenced on
// its workload's subject. A second decision about the same workload in one
// batch waits for the first one's sequence.
func (s *Service) decide(ctx context.Context) error {
	now := s.cfg.Now()
	s.eng.RunToQuiescence(now)
	decisions := s.eng.DrainDecisions()
	s.eng.DrainEvictions()
	if len(decisions) == 0 {
		return nil
	}
	if err := s.lease.Check(ctx); err != nil {
		return err
	}
	type inflight struct {
		d  engine.Decision
		ev events.Event
		f  jetstream.PubAckFuture
	}
	var sent []inflight
	var later []inflight
	subjects := map[string]bool{}
	for i, d := range decisions {
		ev, err := s.event(d, now, i)
		if err != nil {
			return err
		}
		if subjects[ev.Subject] {
			later = append(later, inflight{d: d, ev: ev})
			continue
		}
		subjects[ev.Subject] = true
		expect := s.onSubj[ev.Subject]
		f, err := bus.PublishAsync(s.js, ev, &expect)
		if err != nil {
			return err
		}
		sent = append(sent, inflight{d: d, ev: ev, f: f})
	}
	for _, p := range sent {
		seq, _, err := bus.Result(ctx, p.ev, p.f)
		if err := s.published(p.d, p.ev, seq, err, now); err != nil {
			return err
		}
	}
	for _, p := range later {
		expect := s.onSubj[p.ev.Subject]
		seq, _, err := bus.Publish(ctx, s.js, p.ev, &expect)
		if err := s.published(p.d, p.ev, seq, err, now); err != nil {
			return err
		}
	}
	return nil
}

// published records a decision's publication. On a conflict another
// writer moved the workload first: the decision is taken back and made
// again on the new state.
func (s *Service) published(d engine.Decision, ev events.Event, seq uint64, err error, now time.Time) error {
	if errors.Is(err, bus.ErrConflict) {
		if d.Kind == engine.DecidedAdmission {
			_ = s.eng.Unadmit(d.Key, now)
		}
		return nil
	}
	if err != nil {
		return err
	}
	s.mine[ev.ID] = true
	s.onSubj[ev.Subject] = seq
	return nil
}

// event renders a decision. Its id is derived from the stream position it
// was decided at, so a new leader deciding the same thing at the same
// position is deduplicated by JetStream.
func (s *Service) event(d engine.Decision, now time.Time, i int) (events.Event, error) {
	ns, name, _ := strings.Cut(d.Key, "/")
	ref := events.WorkloadRef{Namespace: ns, Name: name}
	ev := events.Event{ID: fmt.Sprintf("admission/%d/%d", s.last, i), Source: "jetqueue/admission", Time: now,
		Subject: events.WorkloadSubject(ns, name)}
	switch d.Kind {
	case engine.DecidedAdmission:
		ev.Type, ev.Data = events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: *d.Admission}
	case engine.DecidedInadmissible:
		ev.Type, ev.Data = events.Inadmissible, &events.InadmissibleData{WorkloadRef: ref, Reason: *d.Reason}
	case engine.DecidedPreemption:
		data := &events.PreemptionRequestedData{WorkloadRef: ref}
		for _, t := range d.Targets {
			vns, vname, _ := strings.Cut(t.Workload.Key, "/")
			data.ClusterQueue = t.PreemptorCQ
			data.Victims = append(data.Victims, events.Victim{WorkloadRef: events.WorkloadRef{Namespace: vns, Name: vname},
				ClusterQueue: t.Workload.ClusterQueue, Kind: t.Kind})
		}
		ev.Type, ev.Data = events.PreemptionRequested, data
	case engine.DecidedEviction:
		data := &events.EvictedData{WorkloadRef: ref, Reason: d.Eviction.Reason, PreemptorCQ: d.Eviction.PreemptorCQ, Kind: d.Eviction.Kind}
		if p := d.Eviction.Preemptor; p != "" {
			pns, pname, _ := strings.Cut(p, "/")
			data.Preemptor = &events.WorkloadRef{Namespace: pns, Name: pname}
		}
		ev.Type, ev.Data = events.Evicted, data
	default:
		return ev, fmt.Errorf("unknown decision %q", d.Kind)
	}
	return ev, nil
}
