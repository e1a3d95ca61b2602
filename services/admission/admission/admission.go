// Package admission is the admission service's shell around the decision
// core. Its loop:
//
//	consume JQ_EVENTS in order ─▶ apply each event to the engine
//	      ▲                             │ (caught up with the stream)
//	      │                             ▼
//	      └──── publish decisions ◀─ run scheduling to quiescence
//
// Every instance follows the whole stream (an ordered consumer, from the
// newest usable snapshot in JQ_SNAPSHOTS onwards, or from the start: see
// snapshot.go), so a standby is hot; only the holder of the shard's lease
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
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/clock"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// Config is the service's configuration.
type Config struct {
	bus.Member
	// Now is the clock; nil means the wall clock.
	Now func() time.Time
	// Wall measures how long an incomplete batch has waited (a safety net
	// against a dead sender, in real time even under a manual clock); nil
	// means time.Now.
	Wall func() time.Time
	// ManualClock reads the shared manual clock instead (dev and test).
	ManualClock bool
	// Snapshot says when to snapshot the state (libs/snapshot); the zero
	// policy never writes one (a snapshot found is still restored).
	Snapshot snapshot.Policy
	// MaxSkew is how far ahead of this clock's reading the latest event
	// read may stamp a decision, for publishers whose clocks run a little
	// ahead (0 means 1s). An event's time never moves the clock further,
	// so an event stamped in the far future cannot stamp later decisions.
	MaxSkew time.Duration
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
	rt      *service.Runtime
	// open are the batches still arriving: their members are held back
	// (not applied, so not decided) until the last arrives or the batch
	// is closed in the log; waiting maps a subject to the batch holding
	// its earliest unapplied event, since a subject's events apply in
	// order; closed are batches given up on (by log time), whose late
	// members apply at once.
	open    map[string]*openBatch
	waiting map[string]string
	closed  map[string]time.Time
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
	// fences are the positions of the decisions the engine made while an
	// event was applied, by their index among the undrained ones: a
	// decision is fenced at what this instance had read when it was made,
	// not when it is published (see fence).
	fences map[int]fence
	// seen is the latest event time read: decisions are not stamped
	// before what they answer (within MaxSkew, or on the manual clock
	// once this copy of it has caught up).
	seen   time.Time
	manual *clock.Manual
	// floor is the purge floor as last read (see releaseBelowFloor).
	floor uint64
	// awaited is, on the manual clock, the latest event time this
	// instance waited for in vain: an event stamped ahead of the shared
	// clock is waited for once, not before every decision.
	awaited time.Time
	// requested are the evictions another instance's preemption requests
	// asked for whose victims have not moved since: the preemptor has yet
	// to publish them. A new leader adopts them rather than deciding the
	// preemption again, which could choose other victims.
	requested []events.Event
	// m are the service's metrics (Kueue's and its own); obs counts the
	// log's events into Kueue's counters.
	m   *metrics.Admission
	obs observer
	// cycleStart is when the current admission attempt began (wall clock).
	cycleStart time.Time
	// snaps writes snapshots; decided is set once this run of follow
	// has decided, after which the state is no longer a fold of the log.
	snaps   *snapshot.Writer
	decided bool
	// shard is this instance's shard of shards (see shard.go); trees is
	// each ClusterQueue's last tree and handovers the moves between
	// shards not yet released in the log, both folds of the log kept
	// only when sharded; sentRelease are the releases this run published.
	shard, shards int
	trees         map[string]string
	handovers     []events.ShardReleasedData
	sentRelease   map[string]bool
	warnedBlocked bool
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

// source is the ce-source of admission's events.
const source = "jetqueue/admission"

// awaitClock bounds how long admission waits, on the manual clock, for
// its copy of the clock to reach an event's time.
var awaitClock = 5 * time.Second

// errResync asks for the log to be replayed: the engine got ahead of it
// on grounds the log did not confirm.
var errResync = errors.New("the log contradicts a decision in flight")

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Wall == nil {
		cfg.Wall = time.Now
	}
	if cfg.Shards < 0 || cfg.Shards > bus.MaxShards {
		return bus.ConfigError{Err: fmt.Errorf("--shards %d: want 1 to %d (0 means 1)", cfg.Shards, bus.MaxShards)}
	}
	shard, err := cfg.ShardIndex("admission")
	if err != nil {
		return bus.ConfigError{Err: err}
	}
	conn, leader, err := cfg.Join(ctx, rt.Log, "admission")
	if err != nil {
		return err
	}
	defer conn.Close()
	js := conn.JS
	if err := bus.RecordShardCount(ctx, js, "admission", max(cfg.Shards, 1)); err != nil {
		return err
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = time.Second
	}
	var manual *clock.Manual
	if cfg.ManualClock {
		if manual, err = clock.NewManual(ctx, js); err != nil {
			return err
		}
		cfg.Now = manual.Now
	}
	s := &Service{cfg: cfg, log: rt.Log, rt: rt, js: js, leader: leader, batch: 512, manual: manual,
		m: metrics.NewAdmission(rt.Registry), shard: shard, shards: max(cfg.Shards, 1)}
	s.m.SetShard(s.shard, s.shards)
	if s.progress, err = bus.NewProgress(ctx, js, bus.ProgressName("admission", shard)); err != nil {
		return err
	}
	defer s.leader.Release()
	// Runs before the release: the last mark is stored first.
	defer s.progress.Stop()
	store, err := snapshot.Open(ctx, js, snapshot.Options{Name: cfg.Shard, Version: snapshotVersion, Log: rt.Log,
		Metrics: snapshot.NewMetrics(rt.Registry, "admission")})
	if err != nil {
		return err
	}
	s.snaps = &snapshot.Writer{Store: store, Policy: cfg.Snapshot, Wall: cfg.Wall}
	defer s.snaps.Wait()
	for ctx.Err() == nil {
		err := s.follow(ctx, rt)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errResync) {
			s.m.Replayed()
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
		s.m.SetLeading(false)
	}
	return nil
}

// reset empties the state.
func (s *Service) reset() {
	s.eng = engine.New()
	s.eng.RecordDecisions()
	s.observeCycles()
	s.obs.replayed = s.obs.counted
	s.onSubj, s.mine, s.last = map[string]uint64{}, map[string]bool{}, 0
	s.open, s.waiting, s.closed = map[string]*openBatch{}, map[string]string{}, map[string]time.Time{}
	s.held, s.awaiting, s.chain, s.requested = nil, map[string]bool{}, map[string]uint64{}, nil
	s.fences = map[int]fence{}
	s.floor = 0
	s.seen, s.decided = time.Time{}, false
	s.trees, s.handovers, s.sentRelease = map[string]string{}, nil, map[string]bool{}
	s.shardEngine()
}

// follow rebuilds the state from the newest usable snapshot and the
// stream after it (the whole stream without one), then keeps following
// the stream, deciding while it holds the lease.
func (s *Service) follow(ctx context.Context, rt *service.Runtime) error {
	s.reset()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if s.snaps != nil {
		// A restore builds the whole heap at once, and nearly all it
		// allocates stays: collecting it as it grows would mark it
		// again and again for little garbage. A GOMEMLIMIT still holds.
		gc := debug.SetGCPercent(-1)
		seq := s.snaps.Store.Restore(ctx, func(sn *snapshot.Snapshot) error { return s.restoreState(sn, nil) })
		debug.SetGCPercent(gc)
		if seq > 0 {
			s.snaps.Restored(seq)
			cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq + 1}
		}
	}
	cons, err := bus.NewReader(ctx, s.js, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", events.Stream, err)
	}
	defer cons.Close()
	var b bus.Backoff
	for ctx.Err() == nil {
		err := s.step(ctx, rt, cons)
		if err == nil {
			b.Reset()
		} else if !s.retry(ctx, err, &b) {
			return err
		}
	}
	return nil
}

// step consumes what is available and, once caught up, decides.
func (s *Service) step(ctx context.Context, rt *service.Runtime, cons bus.Fetcher) error {
	caughtUp, err := s.consume(ctx, cons)
	if err != nil || !caughtUp {
		return err
	}
	if err := s.releaseBelowFloor(ctx); err != nil {
		return err
	}
	rt.SetReady(true)
	defer s.publishStats()
	s.maybeSnapshot(ctx)
	if err := s.lead(ctx); err != nil {
		return err
	}
	if s.leading {
		if err := s.closeStaleBatches(ctx); err != nil {
			return err
		}
		if err := s.decide(ctx); err != nil {
			return err
		}
	}
	if err := s.progress.Report(ctx, s.last); err != nil {
		return requestError{"progress", err}
	}
	return nil
}

// consume applies the next batch of events and reports whether the
// instance has caught up with the stream.
func (s *Service) consume(ctx context.Context, cons bus.Fetcher) (bool, error) {
	msgs, caughtUp, err := bus.Follow(ctx, cons, s.batch, 200*time.Millisecond, s.last)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		if len(msgs) > 0 {
			// Read and not applied: only a replay reads them again.
			return false, fmt.Errorf("fetch: %w", err)
		}
		return false, requestError{"fetch", err}
	}
	for _, msg := range msgs {
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		s.last = meta.Sequence.Stream
		ev, err := bus.Decode(msg)
		if err != nil {
			s.track(msg.Subject(), s.last, false)
			s.rt.Skip(s.last, msg.Headers().Get(events.HeaderType), err)
			continue
		}
		if err := s.receive(read{seq: s.last, subject: msg.Subject(), ev: ev}); err != nil {
			return false, err
		}
	}
	return caughtUp, nil
}

// read is one event as read from the log.
type read struct {
	seq     uint64
	subject string
	ev      events.Event
}

// receive applies an event, or holds it back while its batch is still
// arriving (or while an earlier event on its subject is held).
func (s *Service) receive(r read) error {
	if d, ok := r.ev.Data.(*events.BatchClosedData); ok && r.ev.Source == source {
		return s.closeBatch(d.Batch, r.ev.Time)
	}
	var own *openBatch
	if b := r.ev.Batch; b != nil {
		if _, gone := s.closed[b.ID]; !gone {
			own = s.open[b.ID]
			if own == nil {
				own = &openBatch{id: b.ID, missing: b.Size, since: s.cfg.Wall()}
				s.open[b.ID] = own
			}
			own.missing--
		}
	}
	switch {
	case s.waiting[r.subject] != "":
		ob := s.open[s.waiting[r.subject]]
		ob.held = append(ob.held, r)
	case own != nil && own.missing > 0:
		own.held = append(own.held, r)
		s.waiting[r.subject] = own.id
	default:
		if own != nil {
			if err := s.release(own, r.ev.Time); err != nil {
				return err
			}
		}
		return s.process(r)
	}
	if own != nil && own.missing <= 0 {
		return s.release(own, r.ev.Time)
	}
	return nil
}

// process applies one event that is not held back.
func (s *Service) process(r read) error {
	ev := r.ev
	s.track(r.subject, r.seq, false)
	if ev.Time.After(s.seen) {
		s.seen = ev.Time
	}
	s.resolveRequested(r.subject)
	s.count(r.seq, ev)
	if d, ok := ev.Data.(*events.ShardReleasedData); ok {
		// Read back by its publisher too: it closes the handover in
		// every instance's fold alike.
		if err := d.Validate(); err != nil {
			s.rt.Skip(r.seq, string(ev.Type), err)
			return nil
		}
		s.released(d)
		return nil
	}
	if s.mine[ev.ID] {
		delete(s.mine, ev.ID)
		return nil
	}
	if s.awaiting[r.subject] {
		applied, err := s.victimMoved(r.subject, ev, r.seq)
		if err != nil || applied {
			return err
		}
	}
	if d, ok := ev.Data.(*events.PreemptionRequestedData); ok {
		s.noteRequested(ev, d)
	}
	made := len(s.eng.Undrained())
	if err := s.apply(ev); err != nil {
		s.rt.Skip(r.seq, string(ev.Type), err)
		return nil
	}
	s.fence(made)
	s.noteTree(ev, r.seq)
	s.track(r.subject, r.seq, events.Ends(ev.Type))
	return nil
}

// track keeps the position of each live workload's subject, which
// decisions are fenced at. Only workload subjects are kept (decisions
// are about workloads), and a workload's is forgotten when it ends, so
// the map holds no more than the engine's live workloads; a later
// submission under the name starts it again.
func (s *Service) track(subject string, seq uint64, ended bool) {
	switch {
	case !events.IsWorkloadSubject(subject):
	case ended:
		delete(s.onSubj, subject)
	case seq > s.onSubj[subject]:
		// Never back: this instance's own decisions are tracked when
		// published, ahead of the reading that reaches them, and a
		// subject fenced at an older position would refuse the next
		// decision about it.
		s.onSubj[subject] = seq
	}
}

// fence is where a decision made while an event was applied was made: its
// workload's subject position then, and its victims' if it preempts.
type fence struct {
	at      uint64
	victims []uint64
}

// fence notes the position of each decision the engine made since the
// first made ones, while an event was applied. Under blockAdmission the
// event that lets the last admitted workload be ready resumes the held
// cycle at once (as Kueue's scheduler wakes), and the cycle's admissions
// are made there, before the rest of the batch is applied: a workload
// admitted then and finished by the next event of the batch must be
// fenced before its finish, which then refuses the admission, and not
// after it, which would publish an admission of a finished workload.
func (s *Service) fence(made int) {
	for i, d := range s.eng.Undrained()[made:] {
		s.fences[made+i] = s.fenceNow(d)
	}
}

// fenceNow is where decision d stands by what this instance has read.
func (s *Service) fenceNow(d engine.Decision) fence {
	f := fence{at: s.onSubj[keySubject(d.Key)]}
	for _, t := range d.Targets {
		f.victims = append(f.victims, s.onSubj[keySubject(t.Workload.Key)])
	}
	return f
}

// keySubject is the subject of the workload namespace/name.
func keySubject(key string) string {
	ns, name, _ := strings.Cut(key, "/")
	return events.WorkloadSubject(ns, name)
}

// apply folds one event into the engine; see replay.Apply.
func (s *Service) apply(ev events.Event) error { return replay.Apply(s.eng, ev) }

// lead acquires the shard's lease when free; a standby keeps trying.
func (s *Service) lead(ctx context.Context) error {
	was := s.leading
	leading, err := s.leader.Lead(ctx)
	if err != nil && !errors.Is(err, bus.ErrLeaseLost) {
		// Only a standby asks anything of JetStream here.
		return requestError{"lease", fmt.Errorf("admission %s: %w", s.cfg.Instance, err)}
	}
	if err != nil {
		return fmt.Errorf("admission %s: %w", s.cfg.Instance, err)
	}
	if leading && !was {
		s.log.Info("leading", zap.String("shard", s.cfg.Shard))
	}
	s.leading = leading
	s.m.SetLeading(leading)
	return nil
}

// decide runs scheduling to quiescence and publishes what it decided, in
// order, up to and including the next preemption; the rest waits for its
// victims' evictions. The lease is checked once before each batch; the
// decisions go out asynchronously (one round trip for the batch), each
// fenced on its workload's subject. A second decision about the same
// workload in one batch waits for the first one's sequence.
func (s *Service) decide(ctx context.Context) error {
	s.decided = true
	if len(s.held) == 0 && s.sharded() {
		if err := s.publishReleases(ctx); err != nil {
			return err
		}
		if s.eng.BlockedBySharding() && !s.warnedBlocked {
			s.log.Error("waitForPodsReady.blockAdmission holds every admission of the cluster while one admitted workload is not ready, which shards deciding in parallel cannot keep: with --shards above 1 admission decides nothing while it is on")
		}
		s.warnedBlocked = s.eng.BlockedBySharding()
	}
	s.adoptRequested()
	if len(s.awaiting) > 0 {
		return nil
	}
	if len(s.held) == 0 {
		now := s.now(ctx)
		s.cycleStart = s.cfg.Wall()
		s.eng.RunToRest(now)
		s.eng.DrainEvictions()
		s.chain = map[string]uint64{}
		for i, d := range s.eng.DrainDecisions() {
			f, early := s.fences[i]
			if !early {
				f = s.fenceNow(d)
			}
			ev, err := s.event(d, now, i, f.victims)
			if err != nil {
				return err
			}
			s.held = append(s.held, decision{Decision: d, at: now, ev: ev, expect: f.at})
		}
		clear(s.fences)
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
	var preemption *decision
	if last := batch[len(batch)-1]; last.Kind == engine.DecidedPreemption {
		preemption, batch = &last, batch[:len(batch)-1]
	}
	type inflight struct {
		d  decision
		ev events.Event
		f  jetstream.PubAckFuture
	}
	var sent []inflight
	var later []decision
	subjects := map[string]bool{}
	for _, d := range batch {
		ev := d.ev
		if subjects[ev.Subject] {
			later = append(later, d)
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
	// The acks are awaited as long as a synchronous publish would: an
	// asynchronous one has no deadline of its own, and one stored by a
	// stream leader that died before answering is never answered. The
	// leader would wait on it for good while its lease, renewed in the
	// background, kept the standby out.
	actx, cancel := context.WithTimeout(ctx, ackWait)
	defer cancel()
	for _, p := range sent {
		seq, _, err := bus.Result(actx, p.ev, p.f)
		rest := mentions(later, p.ev.Subject) || mentions(s.held, p.ev.Subject)
		if preemption != nil {
			rest = rest || mentions([]decision{*preemption}, p.ev.Subject)
		}
		if err := s.published(ctx, p.d, p.ev, seq, err, rest); err != nil {
			return err
		}
	}
	if preemption != nil {
		later = append(later, *preemption)
	}
	for i, d := range later {
		if d.Kind == engine.DecidedPreemption {
			// Last, after every decision before it, so that its victims'
			// sequences include this run's own publications about them,
			// the later ones among them: a victim may have been admitted
			// a cycle before, by a decision that waited here for an
			// earlier one about the same workload.
			live, err := s.victimsStill(d.ev)
			if err != nil {
				return err
			}
			if live == nil {
				break
			}
			d.ev = *live
		}
		expect := s.expect(d)
		seq, _, err := bus.Publish(ctx, s.js, d.ev, &expect)
		if err := s.published(ctx, d, d.ev, seq, err, mentions(later[i+1:], d.ev.Subject) || mentions(s.held, d.ev.Subject)); err != nil {
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

// now is this instance's clock. An event read that is stamped later
// (its publisher's clock runs ahead) moves it by at most MaxSkew. On the
// manual clock every service reads the same time, but an advance reaches
// each copy of it a little apart: it waits, briefly, for its own copy to
// catch up with the events it answers, and never adopts an event's time.
// An event stamped ahead of the shared clock itself (a forged time) is
// waited for once: the decisions after it do not wait again until a later
// time is read.
func (s *Service) now(ctx context.Context) time.Time {
	now := s.cfg.Now()
	if !s.seen.After(now) {
		return now
	}
	if s.manual != nil {
		if !s.seen.After(s.awaited) {
			return now
		}
		wctx, cancel := context.WithTimeout(ctx, awaitClock)
		defer cancel()
		now = s.manual.Await(wctx, s.seen)
		if s.seen.After(now) {
			s.awaited = s.seen
		}
		return now
	}
	if limit := now.Add(s.cfg.MaxSkew); s.seen.After(limit) {
		return limit
	}
	return s.seen
}

// movedByItself says whether the last event of subject is admission's
// own, or cannot be read.
func (s *Service) movedByItself(ctx context.Context, subject string) bool {
	st, err := s.js.Stream(ctx, events.Stream)
	if err != nil {
		return true
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	return err != nil || m.Header.Get(events.HeaderSource) == source
}

// mentions says whether any of ds is about the workload of subject, or
// preempts it.
func mentions(ds []decision, subject string) bool {
	for _, d := range ds {
		if d.ev.Subject == subject {
			return true
		}
		if req, ok := d.ev.Data.(*events.PreemptionRequestedData); ok {
			for _, v := range req.Victims {
				if events.WorkloadSubject(v.Namespace, v.Name) == subject {
					return true
				}
			}
		}
	}
	return false
}

// published records a decision's publication. On a conflict another
// writer moved the workload first: the decision is taken back and made
// again on the new state. rest says whether decisions of the same run
// still to be published are about the same workload: they were made with
// this one in force, and one may preempt the workload this one admitted.
// Its preemptor refuses to evict what the log never admitted, and
// admission waits for that eviction until it reads the event that moved
// the workload; if that event is admission's own, it is never read as a
// move and admission would wait for good, so it replays the log instead.
func (s *Service) published(ctx context.Context, d decision, ev events.Event, seq uint64, err error, rest bool) error {
	if errors.Is(err, bus.ErrConflict) {
		s.m.Refused(string(ev.Type))
		switch d.Kind {
		case engine.DecidedAdmission:
			if rest && s.movedByItself(ctx, ev.Subject) {
				return fmt.Errorf("%w: admission of %s refused by admission's own event, with later decisions of its run about it still to publish", errResync, d.Key)
			}
			_ = s.eng.Unadmit(d.Key, d.at)
		case engine.DecidedPreemption:
			// Its victims are evicted in the engine only.
			return fmt.Errorf("%w: preemption by %s refused", errResync, d.Key)
		case engine.DecidedEviction:
			// The engine released quota the log still holds: replay,
			// and the next run drains the queue again.
			return fmt.Errorf("%w: eviction of %s refused", errResync, d.Key)
		}
		return nil
	}
	if err != nil && bus.Transient(err) {
		// Stored or not, no one can say (a leader gone, an answer lost):
		// the engine may be ahead of the log. Replayed in place, under the
		// lease, as any contradiction is; its id dedupes a decision made
		// again.
		return fmt.Errorf("%w: %w", errResync, err)
	}
	if err != nil {
		return err
	}
	s.mine[ev.ID] = true
	s.track(ev.Subject, seq, false)
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
// position is deduplicated by JetStream. victimSeqs are the positions a
// preemption's victims were chosen at (see fence).
func (s *Service) event(d engine.Decision, now time.Time, i int, victimSeqs []uint64) (events.Event, error) {
	ns, name, _ := strings.Cut(d.Key, "/")
	ref := events.WorkloadRef{Namespace: ns, Name: name}
	// Each shard decides at the same positions: its own prefix keeps
	// JetStream from deduplicating one shard's decision as another's.
	prefix := "admission"
	if s.sharded() {
		prefix = bus.ShardName("admission", s.shard)
	}
	ev := events.Event{ID: events.DecisionID(prefix, s.last, i), Source: source, Time: now,
		Subject: events.WorkloadSubject(ns, name)}
	switch d.Kind {
	case engine.DecidedAdmission:
		ev.Type, ev.Data = events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: *d.Admission}
	case engine.DecidedInadmissible:
		ev.Type, ev.Data = events.Inadmissible, &events.InadmissibleData{WorkloadRef: ref, Reason: *d.Reason}
	case engine.DecidedEviction:
		ev.Type, ev.Data = events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: d.EvictionReason}
	case engine.DecidedPreemption:
		data := &events.PreemptionRequestedData{WorkloadRef: ref}
		for j, t := range d.Targets {
			vns, vname, _ := strings.Cut(t.Workload.Key, "/")
			data.ClusterQueue = t.PreemptorCQ
			data.Victims = append(data.Victims, events.Victim{WorkloadRef: events.WorkloadRef{Namespace: vns, Name: vname},
				ClusterQueue: t.Workload.ClusterQueue, Kind: t.Kind, Seq: victimSeqs[j]})
		}
		ev.Type, ev.Data = events.PreemptionRequested, data
	default:
		return ev, fmt.Errorf("unknown decision %q", d.Kind)
	}
	return ev, nil
}
