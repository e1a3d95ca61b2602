// Package scorer is the scorer service's shell around libs/scoring: it
// ranks nodes for admitted workloads and publishes where their pods should
// go. Three inputs, one output:
//
//	Kubernetes informers | JQ_NODES watch ──▶ Inventory (nodes: allocatable, requested, labels, taints)
//	JQ_EVENTS, ordered consumer (every subject) ──▶ State (pods per podSet, flavors, current admission)
//	JQ_EVENTS, durable "scorer" (jq.ev.wl.>) ──▶ QuotaReserved #N
//	      ──▶ wait until State has applied N ──▶ Place(State, Inventory) ──▶ publish Placed ──▶ ack #N
//	jq.api.v1.score (request/reply) ──▶ Rank ──▶ reply
//
// The loop's contract: consume → apply → decide → publish → ack. Every
// instance folds the whole log into its State (the ordered consumer starts
// at the beginning of the stream), so a restarted or an added instance
// knows every live workload's pod template and every ResourceFlavor; the
// durable consumer only hands out the work, shared by all instances. A
// QuotaReserved event is placed on the State as it is once the follower has
// applied it, which equals the state at the event except for what came
// later: an admission that has since been evicted, or a workload that has
// since finished or been deleted, is not placed, and one that already has
// its Placed event is not placed again. The Placed event's ce-id is derived
// from the QuotaReserved event's, so a redelivery that races past that
// check is deduplicated by JetStream. Placed is advice, not a state
// transition: it changes no quota, and it goes on a subject of its own
// (events.PlacedSubject), so that it never moves the sequence that the
// workload's writers fence on. Nodes are read from the inventory at the time
// of placement; whoever runs the pods keeps requested current.
package scorer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/scoring"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// Inventory sources.
const (
	InventoryKV         = "kv"
	InventoryKubernetes = "kubernetes"
)

// Durable is the name of the consumer that hands out QuotaReserved events.
const Durable = events.ScorerDurable

// Config is the service's configuration.
type Config struct {
	NATSURL string
	// NATS is who the scorer is to NATS.
	NATS     bus.Identity
	Instance string
	// Inventory is InventoryKV or InventoryKubernetes.
	Inventory string
	// Kubeconfig is the kubeconfig file of InventoryKubernetes; empty means
	// the in-cluster service account.
	Kubeconfig string
	// KubeClient, when set, replaces the client built from Kubeconfig.
	KubeClient kubernetes.Interface
	Scoring    ScoringOptions
	Stream     bus.StreamOptions
	// WaitForState bounds how long a QuotaReserved event waits for the
	// follower to apply it before it is handed back for redelivery.
	WaitForState time.Duration
	// Snapshot says when the follower snapshots its state to
	// JQ_SNAPSHOTS (SnapshotName); the zero policy never writes one (a
	// snapshot found is still restored).
	Snapshot snapshot.Policy
}

// Service is one scorer instance.
type Service struct {
	cfg     Config
	log     *zap.Logger
	js      jetstream.JetStream
	scorer  *scoring.Scorer
	inv     *Inventory
	follow  *follower
	rt      *service.Runtime
	placed  *prometheus.CounterVec
	queries *prometheus.CounterVec
}

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.WaitForState <= 0 {
		cfg.WaitForState = 10 * time.Second
	}
	if cfg.Inventory == "" {
		cfg.Inventory = InventoryKV
	}
	scfg, err := cfg.Scoring.Load()
	if err != nil {
		return service.Permanent(fmt.Errorf("scoring config: %w", err))
	}
	sc, err := scoring.New(scfg)
	if err != nil {
		return service.Permanent(fmt.Errorf("scoring config: %w", err))
	}
	s := &Service{cfg: cfg, log: rt.Log, rt: rt, scorer: sc, inv: NewInventory(), follow: newFollower(rt.Skip),
		placed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_scorer_admissions_total",
			Help: "QuotaReserved events handled, by outcome: placed, partial, unplaced, skipped."}, []string{"outcome"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_scorer_queries_total",
			Help: "Ranking queries answered, by status."}, []string{"status"}),
	}
	rt.Registry.MustRegister(s.placed, s.queries)

	var kube kubernetes.Interface
	if cfg.Inventory == InventoryKubernetes {
		if kube = cfg.KubeClient; kube == nil {
			if kube, err = KubeClient(cfg.Kubeconfig); err != nil {
				return err
			}
		}
	} else if cfg.Inventory != InventoryKV {
		return service.Permanent(fmt.Errorf("--inventory: %q, want %s or %s", cfg.Inventory, InventoryKV, InventoryKubernetes))
	}

	nc, err := cfg.NATS.Dial(cfg.NATSURL, "scorer-"+cfg.Instance)
	if err != nil {
		return err
	}
	defer nc.Drain() //nolint:errcheck // best effort on the way out
	if s.js, err = jetstream.New(nc); err != nil {
		return err
	}
	stream, err := bus.EnsureStream(ctx, s.js, cfg.Stream)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	if kube != nil {
		g.Go(func() error { return runKube(gctx, kube, s.inv) })
	} else {
		kv, err := NodesKV(ctx, s.js)
		if err != nil {
			return err
		}
		g.Go(func() error { return runKV(gctx, kv, s.inv, s.log) })
	}
	store, err := snapshot.Open(ctx, s.js, snapshot.Options{Name: SnapshotName, Version: snapshotVersion, Log: rt.Log,
		Metrics: snapshot.NewMetrics(rt.Registry, "scorer")})
	if err != nil {
		return err
	}
	snaps := &snapshot.Writer{Store: store, Policy: cfg.Snapshot}
	defer snaps.Wait()
	g.Go(func() error { return s.follow.run(gctx, s.js, snaps) })

	q := &Querier{Scorer: sc, Inventory: s.inv, observe: func(status int) {
		s.queries.WithLabelValues(fmt.Sprint(status)).Inc()
	}}
	sub, err := q.serve(nc)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", SubjectScore, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the drain covers it

	g.Go(func() error {
		if !waitUntil(gctx, s.inv.Changed, s.inv.Synced) || !waitUntil(gctx, s.follow.changed, s.follow.isCaughtUp) {
			return nil
		}
		cons, err := bus.EnsureConsumer(gctx, stream, bus.ConsumerOptions{Durable: Durable,
			FilterSubjects: []string{events.SubjectRoot + ".wl.>"}})
		if err != nil {
			return err
		}
		rt.SetReady(true)
		s.log.Info("ready", zap.Int("nodes", len(s.inv.Nodes())), zap.String("inventory", cfg.Inventory))
		return s.work(gctx, cons)
	})
	err = g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// waitUntil blocks until cond holds, re-checking whenever changed fires;
// false means ctx ended first.
func waitUntil(ctx context.Context, changed func() <-chan struct{}, cond func() bool) bool {
	for {
		ch := changed()
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// work takes QuotaReserved events from the durable consumer and places
// them; every other event is acknowledged at once.
func (s *Service) work(ctx context.Context, cons jetstream.Consumer) error {
	pull, err := bus.NewPull(cons, 64)
	if err != nil {
		return err
	}
	defer pull.Close()
	for ctx.Err() == nil {
		msgs, err := bus.Batch(ctx, pull, 64, 500*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		for _, msg := range msgs {
			if err := s.handle(ctx, msg); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return nil
	}
	// Only admissions are placed: the other events (a submission carries
	// its whole workload) are acknowledged by their ce-type header, unread.
	// The follower reads them all.
	if events.Type(msg.Headers().Get(events.HeaderType)) == events.QuotaReserved {
		ev, err := bus.Decode(msg)
		if err != nil {
			// A malformed event never gets better: stop its redelivery.
			// The follower, which reads every event, has already skipped
			// it by the services' rule and counted it.
			_ = msg.TermWithReason(err.Error())
			return nil
		}
		err = replay.Guard(func() error { return s.place(ctx, meta.Sequence.Stream, ev) })
		if errors.Is(err, replay.ErrPanicked) {
			// Placing it will panic again on every redelivery.
			s.rt.Skip(meta.Sequence.Stream, string(ev.Type), err)
			_ = msg.TermWithReason(err.Error())
			return nil
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("placement not published; it will be redelivered", zap.String("event", ev.ID), zap.Error(err))
			}
			_ = msg.Nak()
			return nil
		}
	}
	// A plain ack, without waiting for its confirmation: a lost one only
	// means a redelivery, which is skipped (already placed) or
	// deduplicated by JetStream, and catching up with a long log costs no
	// round trip per event. The connection's drain flushes it on stop.
	if err := msg.Ack(); err != nil {
		return fmt.Errorf("ack %d: %w", meta.Sequence.Stream, err)
	}
	return nil
}

// place answers one QuotaReserved event with a Placed event, unless the
// admission is no longer current or already answered.
func (s *Service) place(ctx context.Context, seq uint64, ev events.Event) error {
	d := ev.Data.(*events.QuotaReservedData)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WaitForState)
	err := s.follow.waitFor(wctx, seq)
	cancel()
	if err != nil {
		return fmt.Errorf("state has not reached #%d: %w", seq, err)
	}
	placed, skip := s.decide(ev.ID, d)
	if skip != "" {
		s.placed.WithLabelValues("skipped").Inc()
		s.log.Debug("admission not placed", zap.String("event", ev.ID), zap.String("why", skip))
		return nil
	}
	// A placement is stamped with the time of the admission it places: the
	// scorer reads no clock, so it can never move anyone's time (under a
	// manual clock, a wall-clock stamp here moved every later decision).
	out := events.Event{ID: PlacedID(ev.ID), Type: events.Placed, Source: "jetqueue/scorer", Time: ev.Time,
		Subject: events.PlacedSubject(d.Namespace, d.Name), Data: placed}
	if _, _, err := bus.Publish(ctx, s.js, out, nil); err != nil {
		return err
	}
	s.placed.WithLabelValues(outcome(placed)).Inc()
	return nil
}

// decide places an admission on the current state, or says why not.
func (s *Service) decide(id string, d *events.QuotaReservedData) (*events.PlacedData, string) {
	s.follow.mu.Lock()
	defer s.follow.mu.Unlock()
	wl := s.follow.state.Workloads[key(d.WorkloadRef)]
	switch {
	case wl == nil:
		return nil, "workload unknown, finished or deleted"
	case wl.Admission != id:
		return nil, "admission no longer current"
	case wl.PlacedFor == id:
		return nil, "already placed"
	}
	return &events.PlacedData{WorkloadRef: d.WorkloadRef,
		PodSets: Place(s.scorer, wl, s.follow.state.Flavors, &d.Admission, s.inv.Nodes())}, ""
}

// outcome classifies a placement for the metrics.
func outcome(p *events.PlacedData) string {
	placed, failed := 0, 0
	for _, ps := range p.PodSets {
		if len(ps.Nodes) > 0 {
			placed++
		}
		if ps.Reason != "" {
			failed++
		}
	}
	switch {
	case failed == 0:
		return "placed"
	case placed == 0:
		return "unplaced"
	}
	return "partial"
}

// follower folds the log into a State through an ordered consumer and
// says how far it has got.
type follower struct {
	// skip is the services' rule for an event that cannot be applied.
	skip     func(seq uint64, typ string, err error)
	mu       sync.Mutex
	state    *State
	applied  uint64
	caughtUp bool
	notify   chan struct{}
}

func newFollower(skip func(seq uint64, typ string, err error)) *follower {
	return &follower{skip: skip, state: NewState(), notify: make(chan struct{})}
}

func (f *follower) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notify
}

func (f *follower) isCaughtUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.caughtUp
}

// waitFor returns once the event at stream sequence seq is applied.
func (f *follower) waitFor(ctx context.Context, seq uint64) error {
	reached := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.applied >= seq
	}
	if !waitUntil(ctx, f.changed, reached) {
		return ctx.Err()
	}
	return nil
}

func (f *follower) run(ctx context.Context, js jetstream.JetStream, snaps *snapshot.Writer) error {
	// Every event is a workload or config event: no filter is needed, and
	// nats-server before 2.10 refuses several filter subjects.
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if start := snaps.Store.Restore(ctx, f.restore); start > 0 {
		snaps.Restored(start)
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start + 1}
	}
	cons, err := bus.NewReader(ctx, js, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", events.Stream, err)
	}
	defer cons.Close()
	for ctx.Err() == nil {
		f.mu.Lock()
		last := f.applied
		f.mu.Unlock()
		msgs, atEnd, err := bus.Follow(ctx, cons, 512, 200*time.Millisecond, last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow %s: %w", events.Stream, err)
		}
		f.apply(msgs, atEnd)
		f.maybeSnapshot(ctx, snaps)
	}
	return nil
}

// maybeSnapshot writes a snapshot in the background when the follower
// has caught up and one is due.
func (f *follower) maybeSnapshot(ctx context.Context, snaps *snapshot.Writer) {
	f.mu.Lock()
	at, caughtUp := f.applied, f.caughtUp
	if !caughtUp || !snaps.Due(at) {
		f.mu.Unlock()
		return
	}
	payload, err := f.state.encode()
	f.mu.Unlock()
	if err != nil {
		snaps.Done(0, err)
		return
	}
	snaps.Start(func() (uint64, error) { return at, snaps.Store.Save(ctx, at, payload) })
}

// apply folds a batch and wakes the waiters; caughtUp says the batch
// reached the end of the stream (bus.Follow). An event that cannot be
// applied (it does not decode, its content is impossible, applying it
// panics) is skipped by the services' rule: it is the truth of the log
// and stays there, and stopping on it would stop on it again after every
// restart.
func (f *follower) apply(msgs []jetstream.Msg, caughtUp bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, msg := range msgs {
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		f.applied = meta.Sequence.Stream
		ev, err := bus.Decode(msg)
		if err == nil {
			err = replay.Guard(func() error { return f.state.Apply(ev) })
		}
		if err != nil {
			f.skip(f.applied, msg.Headers().Get(events.HeaderType), err)
		}
	}
	if caughtUp {
		f.caughtUp = true
	}
	close(f.notify)
	f.notify = make(chan struct{})
}
