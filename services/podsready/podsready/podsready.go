// Package podsready is the waitForPodsReady service's shell (KEP-349):
//
//	JQ_EVENTS, ordered consumer from the snapshot (or the start) ─▶ engine replica (events applied as facts)
//	        ▲                                            │ caught up, clock read
//	        │                                            ▼
//	        └── Evicted / Requeued / Deactivated ◀── the engine's due timers
//
// The replica knows every admitted workload's admission time (its
// QuotaReserved event's time), its PodsReady state and its requeue state,
// so every timer is re-armed after a restart from the log alone, never from
// process uptime. The timers due at one instant go out as one batch, in
// the core's order, so admission decides once they have all arrived (as
// the simulator does after firing them):
//
//   - a PodsReady timeout: Evicted (PodsReadyTimeout) with the requeue
//     state, or, once the requeues are spent, Evicted (InactiveWorkload)
//     then Deactivated;
//   - the end of a backoff: Requeued.
//
// Each is fenced on its workload's subject at the sequence the replica
// saw, so a workload that became ready in the meantime is never evicted;
// in a batch, a BatchSkipped stands in for the refused event.
// The instance then waits to read its own events back before firing
// again. Only the holder of the shard's lease publishes; its progress mark
// says up to which time it has acted and when its next timer is due, which
// lets the manual clock step from timer to timer.
package podsready

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// Config is the service's configuration.
type Config struct {
	bus.Member
	ManualClock bool
	// Now is the clock; nil means the wall clock (or the manual one).
	Now func() time.Time
	// Snapshot says when to snapshot the replica (libs/snapshot); the
	// zero policy never writes one (a snapshot found is still restored).
	Snapshot snapshot.Policy
}

// Service is one podsready instance.
type Service struct {
	cfg      Config
	log      *zap.Logger
	js       jetstream.JetStream
	leader   *bus.Leadership
	progress *bus.Progress
	eng      *engine.Engine
	last     uint64
	onSubj   map[string]uint64
	// await is the sequence of this instance's last publication: timers
	// are fired again only once it has been read back.
	await uint64
	rt    *service.Runtime
	// skippedThrough is the last sequence skipped as unappliable.
	skippedThrough uint64
	snaps          *snapshot.Writer
	// dormant counts the events whose bodies were not read because
	// waitForPodsReady was off; full makes the replica read every event
	// (set once the configuration turned waitForPodsReady on after some
	// were not read, for the whole life of the process).
	dormant uint64
	full    bool
}

// errRebuild: waitForPodsReady was turned on after events were passed
// over unread; the replica is built again from the start of the log.
var errRebuild = errors.New("waitForPodsReady turned on: rebuilding the replica from the log")

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	conn, leader, err := cfg.Join(ctx, rt.Log, "podsready")
	if err != nil {
		return err
	}
	defer conn.Close()
	if cfg.ManualClock {
		m, err := clock.NewManual(ctx, conn.JS)
		if err != nil {
			return err
		}
		cfg.Now = m.Now
	}
	s := &Service{cfg: cfg, log: rt.Log, js: conn.JS, leader: leader, rt: rt}
	if s.progress, err = bus.NewProgress(ctx, conn.JS, "podsready"); err != nil {
		return err
	}
	defer s.leader.Release()
	// Runs before the release: the last mark is stored first.
	defer s.progress.Stop()
	store, err := snapshot.Open(ctx, conn.JS, snapshot.Options{Name: cfg.Shard, Version: snapshotVersion, Log: rt.Log,
		Metrics: snapshot.NewMetrics(rt.Registry, "podsready")})
	if err != nil {
		return err
	}
	s.snaps = &snapshot.Writer{Store: store, Policy: cfg.Snapshot}
	defer s.snaps.Wait()
	for ctx.Err() == nil {
		err := s.follow(ctx, rt)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRebuild) {
			s.log.Info("waitForPodsReady is on: replaying the log, reading every event", zap.Uint64("passedOver", s.dormant))
			s.full = true
			continue
		}
		if !errors.Is(err, bus.ErrLeaseLost) {
			return err
		}
		s.log.Warn("lease lost; replaying the log as a standby", zap.Error(err))
	}
	return nil
}

// follow rebuilds the replica from the newest usable snapshot and the
// stream after it (the whole stream without one), then keeps following
// it, firing timers while it holds the lease.
func (s *Service) follow(ctx context.Context, rt *service.Runtime) error {
	s.reset()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if s.snaps != nil {
		if seq := s.snaps.Store.Restore(ctx, s.restoreState); seq > 0 {
			s.snaps.Restored(seq)
			cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq + 1}
		}
	}
	cons, err := bus.NewReader(ctx, s.js, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", events.Stream, err)
	}
	defer cons.Close()
	for ctx.Err() == nil {
		caughtUp, err := s.consume(ctx, cons)
		if err != nil {
			return err
		}
		if !caughtUp || s.last < s.await {
			continue
		}
		rt.SetReady(true)
		s.maybeSnapshot(ctx)
		leading, err := s.leader.Lead(ctx)
		if err != nil {
			return err
		}
		if !leading {
			continue
		}
		now := s.cfg.Now()
		next, ok := s.eng.NextTimer()
		if ok && !next.After(now) {
			if err := s.fire(ctx, now); err != nil {
				return err
			}
			continue
		}
		m := bus.Mark{Seq: s.last, Clock: &now}
		if ok {
			m.Next = &next
		}
		if err := s.progress.Mark(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// reset empties the replica before a replay.
func (s *Service) reset() {
	s.eng, s.last, s.await, s.onSubj, s.dormant = engine.New(), 0, 0, map[string]uint64{}, 0
}

// enabled reports whether the configuration read so far turns
// waitForPodsReady on.
func (s *Service) enabled() bool {
	c := s.eng.Configuration()
	return c != nil && c.WaitForPodsReady != nil && c.WaitForPodsReady.Enable
}

// consume applies the next batch of events and reports whether the
// instance has caught up with the stream. It waits for events no longer
// than until the next timer is due, and briefly on the manual clock, which
// moves without events.
func (s *Service) consume(ctx context.Context, cons bus.Fetcher) (bool, error) {
	wait := time.Second
	if s.cfg.ManualClock {
		wait = 20 * time.Millisecond
	} else if next, ok := s.eng.NextTimer(); ok {
		wait = min(wait, max(time.Until(next), time.Millisecond))
	}
	msgs, caughtUp, err := bus.Follow(ctx, cons, 512, wait, s.last)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("fetch: %w", err)
	}
	for _, msg := range msgs {
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		s.last = meta.Sequence.Stream
		ended, err := s.apply(msg)
		if err != nil {
			return false, err
		}
		s.track(msg.Subject(), s.last, ended)
	}
	return caughtUp, nil
}

// apply folds one event into the replica. An event that cannot be applied
// (it does not decode, its content is impossible, applying it panics) is
// skipped by the services' rule and never stops the replay: returning the
// error would restart the service onto the same event for ever.
//
// It reports whether the event ended its workload (a deletion or expiry
// the engine applied, or, passed over, whose type ends one).
//
// While waitForPodsReady is off the service has nothing to do, so it reads
// only configuration events, by their ce-type header, and passes over the
// rest unread. When a configuration then turns it on, apply answers
// errRebuild: the replica is built again from the log, reading everything.
func (s *Service) apply(msg jetstream.Msg) (ended bool, err error) {
	typ := msg.Headers().Get(events.HeaderType)
	config := typ == string(events.ConfigApplied) || typ == string(events.ConfigDeleted)
	if !s.full && !config && !s.enabled() {
		// Passed over unread; the subject's position is still kept
		// (forgotten when the event's type ends the workload).
		s.dormant++
		return events.Ends(events.Type(typ)), nil
	}
	ev, err := bus.Decode(msg)
	if err == nil {
		err = replay.Guard(func() error { return replay.Apply(s.eng, ev) })
	}
	if err != nil && s.last > s.skippedThrough {
		// A replay after a lost lease reads the same events again: each
		// is counted once.
		s.skippedThrough = s.last
		s.rt.Skip(s.last, typ, err)
	}
	if config && !s.full && s.dormant > 0 && s.enabled() {
		return false, errRebuild
	}
	return err == nil && events.Ends(ev.Type), nil
}

// track keeps the position of each live workload's subject, which the
// timers' events are fenced at. Only workload subjects are kept, and a
// workload's is forgotten when it ends, so the map holds no more than
// the engine's live workloads; a later submission under the name starts
// it again.
func (s *Service) track(subject string, seq uint64, ended bool) {
	switch {
	case !events.IsWorkloadSubject(subject):
	case ended:
		delete(s.onSubj, subject)
	default:
		s.onSubj[subject] = seq
	}
}

// fire publishes every timer due at now, as one batch.
func (s *Service) fire(ctx context.Context, now time.Time) error {
	due := s.eng.DueTimers(now)
	if err := s.leader.Check(ctx); err != nil {
		return err
	}
	var out []events.Event
	for _, t := range due {
		out = append(out, Events(t, now)...)
	}
	// Several events go out as one batch, so that admission decides once
	// all have arrived; a lone one needs none (and, refused by its fence,
	// leaves no batch incomplete).
	var batch *events.Batch
	if len(out) > 1 {
		batch = &events.Batch{ID: fmt.Sprintf("podsready/%d", now.UnixNano()), Size: len(out)}
	}
	refused := map[string]bool{}
	for _, ev := range out {
		ev.Batch = batch
		var expect *uint64
		if refused[ev.Subject] {
			ev = Skipped(ev)
		} else {
			expect = new(s.onSubj[ev.Subject])
		}
		seq, _, err := bus.Publish(ctx, s.js, ev, expect)
		if errors.Is(err, bus.ErrConflict) {
			// The workload moved first (its pods became ready, say): the
			// replica reads why and decides again. In a batch, a stand-in
			// takes the event's place, so the batch still completes.
			s.log.Info("workload changed before its timer's event; not published", zap.String("type", string(ev.Type)),
				zap.String("subject", ev.Subject))
			refused[ev.Subject] = true
			if batch == nil {
				continue
			}
			ev = Skipped(ev)
			seq, _, err = bus.Publish(ctx, s.js, ev, nil)
		}
		if err != nil {
			return err
		}
		s.track(ev.Subject, seq, false)
		s.await = max(s.await, seq)
	}
	return nil
}

// Skipped is the stand-in for a batch member its fence refused.
func Skipped(ev events.Event) events.Event {
	return events.Event{ID: ev.ID + "/skipped", Type: events.BatchSkipped, Source: ev.Source, Time: ev.Time,
		Subject: events.BatchSubject, Batch: ev.Batch,
		Data: &events.BatchSkippedData{Event: ev.ID, Type: ev.Type, Subject: ev.Subject, Reason: "its subject moved first"}}
}

// Events renders a due timer as the events that carry it out. Their ids
// derive from the workload and the instant, so that a repeat (a new leader
// firing the same timer) is deduplicated.
func Events(t engine.Timer, now time.Time) []events.Event {
	ns, name, _ := strings.Cut(t.Key, "/")
	ref := events.WorkloadRef{Namespace: ns, Name: name}
	ev := func(kind string, typ events.Type, data any) events.Event {
		return events.Event{ID: fmt.Sprintf("podsready/%s/%s/%d", t.Key, kind, t.At.UnixNano()), Type: typ,
			Source: "jetqueue/podsready", Time: now, Subject: events.WorkloadSubject(ns, name), Data: data}
	}
	switch {
	case t.Timeout == nil:
		return []events.Event{ev("requeue", events.Requeued, &events.RequeuedData{WorkloadRef: ref, Count: t.RequeueCount, Until: t.At})}
	case t.Timeout.Deactivate:
		return []events.Event{
			ev("deactivate-evict", events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: engine.EvictedByDeactivation}),
			ev("deactivate", events.Deactivated, &ref),
		}
	default:
		at := t.Timeout.RequeueAt
		return []events.Event{ev("timeout", events.Evicted, &events.EvictedData{WorkloadRef: ref,
			Reason: engine.EvictedByPodsReadyTimeout, RequeueCount: t.Timeout.Count, RequeueAt: &at})}
	}
}
