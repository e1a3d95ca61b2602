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
//
// A preemption evicts its victims in the engine at once, as Kueue's cache
// does, so that the rest of the run decides exactly as the simulator; but
// the evictions are the preemptor service's to publish. Decisions after a
// PreemptionRequested are therefore held back until every victim's
// Evicted is in the log, so the log never shows quota admitted twice. If
// a victim changes first (PodsReady, a new priority), the eviction is
// refused by its fence and the instance replays the log to the truth.
package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/clock"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/service"
)

// Config is the service's configuration.
type Config struct {
	bus.Member
	// Now is the clock; nil means the wall clock.
	Now func() time.Time
	// ManualClock reads the shared manual clock instead (dev and test).
	ManualClock bool
}

// Service is one admission instance.
type Service struct {
	cfg     Config
	log     *zap.Logger
	js      jetstream.JetStream
	eng     *engine.Engine
	leader  *bus.Leadership
	leading bool
	last    uint64
	onSubj  map[string]uint64
	mine    map[string]bool
	batch   int
	// open counts the workloads still to come of each batch submission,
	// with when the batch was first seen: decisions wait for whole batches.
	open map[string]*openBatch
	// progress publishes how far this instance has read, for /v1/sync.
	progress *bus.Progress
	// held are decisions made but not yet published, waiting for the
	// evictions of a preemption published before them; awaiting are the
	// subjects of those victims.
	held     []decision
	awaiting map[string]bool
	// chain is the sequence each subject is at after this run's own
	// publications, which the run's later decisions about it expect.
	chain map[string]uint64
	// seen is the latest event time read: decisions are never stamped
	// before what they answer, even if this clock lags the publisher's.
	seen time.Time
	// requested are the evictions another instance's preemption requests
	// asked for whose victims have not moved since: the preemptor has yet
	// to publish them. A new leader adopts them rather than deciding the
	// preemption again, which could choose other victims.
	requested []events.Event
}

// decision is an engine decision rendered as its event when it was made,
// with the sequence its subject was at then: it is published only if the
// workload did not change since.
type decision struct {
	engine.Decision
	at     time.Time
	ev     events.Event
	expect uint64
}

// errResync asks for the log to be replayed: the engine got ahead of it
// on grounds the log did not confirm.
var errResync = errors.New("the log contradicts a decision in flight")

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	conn, leader, err := cfg.Join(ctx, rt.Log, "admission")
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
	s := &Service{cfg: cfg, log: rt.Log, js: js, leader: leader, batch: 512}
	if s.progress, err = bus.NewProgress(ctx, js, "admission"); err != nil {
		return err
	}
	defer s.leader.Release()
	for ctx.Err() == nil {
		err := s.follow(ctx, rt)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errResync) {
			s.log.Info("replaying the log", zap.Error(err))
			continue
		}
		if !errors.Is(err, bus.ErrLeaseLost) {
			return err
		}
		// Decisions applied in memory may never have been published: start
		// over from the log as a standby.
		s.log.Warn("lease lost; replaying the log as a standby", zap.Error(err))
		s.leading = false
	}
	return nil
}

// follow replays the stream from the start into a fresh engine, then keeps
// following it, deciding while it holds the lease.
func (s *Service) follow(ctx context.Context, rt *service.Runtime) error {
	s.eng = engine.New()
	s.eng.RecordDecisions()
	s.onSubj, s.mine, s.last, s.open = map[string]uint64{}, map[string]bool{}, 0, map[string]*openBatch{}
	s.held, s.awaiting, s.chain, s.requested = nil, map[string]bool{}, map[string]uint64{}, nil
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
	if s.leading {
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
		if ev.Time.After(s.seen) {
			s.seen = ev.Time
		}
		s.resolveRequested(msg.Subject())
		if s.mine[ev.ID] {
			delete(s.mine, ev.ID)
			continue
		}
		if s.awaiting[msg.Subject()] {
			applied, err := s.victimMoved(msg.Subject(), ev, s.last)
			if err != nil {
				return false, err
			}
			if applied {
				continue
			}
		}
		if ev.Batch != nil {
			s.batchMember(ev.Batch)
		}
		if d, ok := ev.Data.(*events.PreemptionRequestedData); ok {
			s.noteRequested(ev, d)
		}
		if err := s.apply(ev); err != nil {
			s.log.Warn("event not applied", zap.Uint64("seq", s.last), zap.String("type", string(ev.Type)), zap.Error(err))
		}
	}
	return n == 0 || pending == 0, nil
}

// apply folds one event into the engine; see replay.Apply.
func (s *Service) apply(ev events.Event) error { return replay.Apply(s.eng, ev) }

// noteRequested keeps the evictions another instance's preemption request
// asks for, of the victims still where it chose them.
func (s *Service) noteRequested(req events.Event, d *events.PreemptionRequestedData) {
	for i, ev := range replay.Evictions(req, d) {
		if s.onSubj[ev.Subject] == d.Victims[i].Seq {
			s.requested = append(s.requested, ev)
		}
	}
}

// resolveRequested forgets a requested eviction once its victim's subject
// moves: the eviction arrived and is applied as usual, or something else
// came first and the preemptor's fence will refuse it.
func (s *Service) resolveRequested(subject string) {
	if len(s.requested) > 0 {
		s.requested = slices.DeleteFunc(s.requested, func(ev events.Event) bool { return ev.Subject == subject })
	}
}

// adoptRequested takes over the preemptions another leader requested whose
// evictions are still to come: the engine evicts their victims now, as
// that leader's did when it chose them, and decisions wait for the
// evictions, as its did.
func (s *Service) adoptRequested() {
	for _, ev := range s.requested {
		if err := s.apply(ev); err != nil {
			s.log.Warn("requested eviction not applied", zap.String("subject", ev.Subject), zap.Error(err))
			continue
		}
		s.awaiting[ev.Subject] = true
	}
	s.requested = nil
}

// victimMoved handles an event about a victim whose eviction is awaited,
// and reports whether it is already applied. The preemptor's Evicted is:
// the engine evicted the victim when it chose it. A finish or delete makes
// the eviction moot and is applied as usual. Anything else means the
// preemptor's fence refused the eviction, and the engine is ahead of the
// log.
func (s *Service) victimMoved(subject string, ev events.Event, seq uint64) (bool, error) {
	delete(s.awaiting, subject)
	switch d := ev.Data.(type) {
	case *events.EvictedData:
		if d.Reason == engine.EvictedByPreemption {
			// Part of the run that chose the victim: the run's later
			// decisions about it come after this eviction.
			s.chain[subject] = seq
			return true, nil
		}
	case *events.WorkloadFinishedData:
		return false, nil
	case *events.WorkloadRef:
		if ev.Type == events.WorkloadDeleted {
			return false, nil
		}
	}
	return false, fmt.Errorf("%w: %s on a victim awaiting eviction", errResync, ev.Type)
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

// lead acquires the shard's lease when free; a standby keeps trying.
func (s *Service) lead(ctx context.Context) error {
	was := s.leading
	leading, err := s.leader.Lead(ctx)
	if err != nil {
		return fmt.Errorf("admission %s: %w", s.cfg.Instance, err)
	}
	if leading && !was {
		s.log.Info("leading", zap.String("shard", s.cfg.Shard))
	}
	s.leading = leading
	return nil
}

// decide runs scheduling to quiescence and publishes what it decided, in
// order, up to and including the next preemption; the rest waits for its
// victims' evictions. The lease is checked once before each batch; the
// decisions go out asynchronously (one round trip for the batch), each
// fenced on its workload's subject. A second decision about the same
// workload in one batch waits for the first one's sequence.
func (s *Service) decide(ctx context.Context) error {
	s.adoptRequested()
	if len(s.awaiting) > 0 {
		return nil
	}
	if len(s.held) == 0 {
		now := s.now()
		s.eng.RunToQuiescence(now)
		s.eng.DrainEvictions()
		s.chain = map[string]uint64{}
		for i, d := range s.eng.DrainDecisions() {
			ev, err := s.event(d, now, i)
			if err != nil {
				return err
			}
			s.held = append(s.held, decision{Decision: d, at: now, ev: ev, expect: s.onSubj[ev.Subject]})
		}
	}
	if len(s.held) == 0 {
		return nil
	}
	if err := s.leader.Check(ctx); err != nil {
		return err
	}
	n := len(s.held)
	for i, d := range s.held {
		if d.Kind == engine.DecidedPreemption {
			n = i + 1
			break
		}
	}
	batch := s.held[:n]
	s.held = slices.Clone(s.held[n:])
	type inflight struct {
		d  decision
		ev events.Event
		f  jetstream.PubAckFuture
	}
	var sent []inflight
	var later []inflight
	subjects := map[string]bool{}
	for _, d := range batch {
		ev := d.ev
		if subjects[ev.Subject] {
			later = append(later, inflight{d: d, ev: ev})
			continue
		}
		subjects[ev.Subject] = true
		expect := s.expect(d)
		f, err := bus.PublishAsync(s.js, ev, &expect)
		if err != nil {
			return err
		}
		sent = append(sent, inflight{d: d, ev: ev, f: f})
	}
	for _, p := range sent {
		seq, _, err := bus.Result(ctx, p.ev, p.f)
		if err := s.published(p.d, p.ev, seq, err); err != nil {
			return err
		}
	}
	for _, p := range later {
		expect := s.expect(p.d)
		seq, _, err := bus.Publish(ctx, s.js, p.ev, &expect)
		if err := s.published(p.d, p.ev, seq, err); err != nil {
			return err
		}
	}
	return nil
}

// expect is the sequence a decision's subject must be at: where it was
// when decided, or where this run's last publication about it left it.
func (s *Service) expect(d decision) uint64 {
	if seq, ok := s.chain[d.ev.Subject]; ok {
		return seq
	}
	return d.expect
}

// now is the clock, but never before the latest event read.
func (s *Service) now() time.Time {
	now := s.cfg.Now()
	if s.seen.After(now) {
		return s.seen
	}
	return now
}

// published records a decision's publication. On a conflict another
// writer moved the workload first: the decision is taken back and made
// again on the new state.
func (s *Service) published(d decision, ev events.Event, seq uint64, err error) error {
	if errors.Is(err, bus.ErrConflict) {
		switch d.Kind {
		case engine.DecidedAdmission:
			_ = s.eng.Unadmit(d.Key, d.at)
		case engine.DecidedPreemption:
			// Its victims are evicted in the engine only.
			return fmt.Errorf("%w: preemption by %s refused", errResync, d.Key)
		}
		return nil
	}
	if err != nil {
		return err
	}
	s.mine[ev.ID] = true
	s.onSubj[ev.Subject] = seq
	s.chain[ev.Subject] = seq
	if d.Kind == engine.DecidedPreemption {
		for _, v := range ev.Data.(*events.PreemptionRequestedData).Victims {
			s.awaiting[events.WorkloadSubject(v.Namespace, v.Name)] = true
		}
	}
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
				ClusterQueue: t.Workload.ClusterQueue, Kind: t.Kind, Seq: s.onSubj[events.WorkloadSubject(vns, vname)]})
		}
		ev.Type, ev.Data = events.PreemptionRequested, data
	default:
		return ev, fmt.Errorf("unknown decision %q", d.Kind)
	}
	return ev, nil
}
