// Package preemptor is the preemptor service's shell: it carries out the
// preemptions that admission decides.
//
//	JQ_EVENTS, durable "preemptor" ─▶ PreemptionRequested ─▶ Evicted (Preempted) for each victim,
//	                                                          fenced on the victim's subject
//
// Admission chooses the victims with the core's preemption code, inside
// the scheduling cycle that needs them (as Kueue's scheduler does), and
// names each with the sequence its subject was at then. The preemptor
// publishes each eviction with Nats-Expected-Last-Subject-Sequence at that
// sequence: a victim that changed since (its pods became ready, it
// finished, its priority moved) is never evicted on stale grounds, and
// admission, seeing the change, decides again on the new state.
//
// Redelivery is harmless: an eviction's id derives from the request's, so
// JetStream deduplicates a second publication, and after the window its
// fence fails. Only the holder of the shard's lease consumes; a standby
// takes over from the durable consumer's acknowledged position.
package preemptor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/service"
)

// Config is the service's configuration.
type Config struct {
	bus.Member
}

// Durable is the preemptor's consumer on JQ_EVENTS.
const Durable = "preemptor"

// Service is one preemptor instance.
type Service struct {
	cfg      Config
	log      *zap.Logger
	js       jetstream.JetStream
	leader   *bus.Leadership
	progress *bus.Progress
	outcomes *prometheus.CounterVec
	rt       *service.Runtime
	stream   jetstream.Stream
}

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	conn, leader, err := cfg.Join(ctx, rt.Log, "preemptor")
	if err != nil {
		return err
	}
	defer conn.Close()
	s := &Service{cfg: cfg, log: rt.Log, js: conn.JS, leader: leader, rt: rt, stream: conn.Stream,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_preemptor_evictions_total",
			Help: "Victims by outcome: evicted, stale (changed since chosen: not evicted), duplicate."}, []string{"outcome"})}
	if rt.Registry != nil {
		rt.Registry.MustRegister(s.outcomes)
	}
	if s.progress, err = bus.NewProgress(ctx, conn.JS, "preemptor"); err != nil {
		return err
	}
	defer s.leader.Release()
	// Runs before the release: the last mark is stored first.
	defer s.progress.Stop()
	rt.SetReady(true)
	for ctx.Err() == nil {
		leading, err := s.leader.Lead(ctx)
		switch {
		case errors.Is(err, bus.ErrLeaseLost):
			s.log.Warn("lease lost; standing by")
			continue
		case err != nil:
			return err
		case !leading:
			select {
			case <-ctx.Done():
			case <-time.After(cfg.TTL() / 3):
			}
			continue
		}
		s.log.Info("leading", zap.String("shard", cfg.Shard))
		if err := s.work(ctx, conn.Stream); err != nil && !errors.Is(err, bus.ErrLeaseLost) {
			return err
		}
	}
	return nil
}

// consumerOptions is the preemptor's durable consumer: every event, one
// acknowledgement per batch.
var consumerOptions = bus.ConsumerOptions{Durable: Durable,
	FilterSubjects: []string{events.SubjectRoot + ".>"}, AckWait: 10 * time.Second, AckAll: true}

// work consumes while this instance holds the lease.
func (s *Service) work(ctx context.Context, stream jetstream.Stream) error {
	cons, err := bus.EnsureConsumer(ctx, stream, consumerOptions)
	if err != nil {
		return err
	}
	// What a predecessor fetched and did not acknowledge is delivered
	// again first (bus.Rewind says why it must be). A leader that stopped
	// between acknowledging a batch and reporting it left the consumer
	// ahead of its mark; nothing is delivered again, so without the
	// advance /v1/sync would wait on the gap for ever.
	info, err := bus.Rewind(ctx, stream, Durable)
	if err != nil {
		return err
	}
	if err := s.progress.Advance(ctx, info.AckFloor.Stream); err != nil {
		return err
	}
	pull, err := bus.NewPull(cons, 256)
	if err != nil {
		return err
	}
	defer pull.Close()
	for ctx.Err() == nil {
		if _, err := s.leader.Lead(ctx); err != nil {
			return err
		}
		msgs, err := bus.Batch(ctx, pull, 256, 200*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		// Acknowledged once per batch, up to the last message handled: the
		// rest is delivered again (after AckWait, or to a new leader).
		var last uint64
		var handled jetstream.Msg
		for _, m := range msgs {
			if err = s.handle(ctx, m); err != nil {
				break
			}
			handled = m
			if meta, merr := m.Metadata(); merr == nil {
				last = meta.Sequence.Stream
			}
		}
		if handled != nil {
			if aerr := handled.Ack(); aerr != nil && err == nil {
				err = aerr
			}
		}
		if err != nil {
			return err
		}
		if last > 0 {
			if err := s.progress.Report(ctx, last); err != nil {
				return err
			}
		}
	}
	return nil
}

// handle carries out one PreemptionRequested; other events pass. A
// request that cannot be carried out as written (it does not decode, or
// names a victim that never existed) is skipped by the services' rule
// rather than returned as an error, which would restart the service onto
// the same request for ever.
func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	typ := m.Headers().Get(events.HeaderType)
	if events.Type(typ) != events.PreemptionRequested {
		return nil
	}
	meta, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("message metadata: %w", err)
	}
	seq := meta.Sequence.Stream
	ev, err := bus.Decode(m)
	if err != nil {
		s.rt.Skip(seq, typ, err)
		return nil
	}
	req := ev.Data.(*events.PreemptionRequestedData)
	if err := checkVictims(seq, req); err != nil {
		s.rt.Skip(seq, typ, err)
		return nil
	}
	if err := s.leader.Check(ctx); err != nil {
		return err
	}
	unknown, err := s.evict(ctx, ev, req)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		s.rt.Skip(seq, typ, fmt.Errorf("%w: %s", errUnknownVictim, strings.Join(unknown, ", ")))
	}
	return nil
}

// errUnknownVictim is a preemption request naming a workload that never
// existed.
var errUnknownVictim = errors.New("victims that never existed")

// checkVictims refuses what no admission leader can have written: a victim
// holds quota, so its subject has events, all of them before the request.
func checkVictims(seq uint64, req *events.PreemptionRequestedData) error {
	for _, v := range req.Victims {
		if v.Seq == 0 || v.Seq >= seq {
			return fmt.Errorf("victim %s at sequence %d of a request at %d: impossible", replay.Key(v.WorkloadRef), v.Seq, seq)
		}
	}
	return nil
}

// evict publishes the request's evictions, each fenced at the sequence its
// victim was chosen at, and returns the victims that turned out never to
// have existed.
func (s *Service) evict(ctx context.Context, ev events.Event, req *events.PreemptionRequestedData) ([]string, error) {
	type inflight struct {
		ev events.Event
		f  jetstream.PubAckFuture
	}
	var sent []inflight
	for i, ev := range replay.Evictions(ev, req) {
		expect := req.Victims[i].Seq
		f, err := bus.PublishAsync(s.js, ev, &expect)
		if err != nil {
			return nil, err
		}
		sent = append(sent, inflight{ev, f})
	}
	var unknown []string
	for i, p := range sent {
		_, dup, err := bus.Result(ctx, p.ev, p.f)
		switch {
		case errors.Is(err, bus.ErrConflict):
			exists, err := s.exists(ctx, p.ev.Subject)
			if err != nil {
				return nil, err
			}
			if !exists {
				unknown = append(unknown, replay.Key(req.Victims[i].WorkloadRef))
				continue
			}
			s.outcomes.WithLabelValues("stale").Inc()
			s.log.Info("victim changed since it was chosen; not evicted", zap.String("subject", p.ev.Subject),
				zap.String("request", ev.ID))
		case err != nil:
			return nil, err
		case dup:
			s.outcomes.WithLabelValues("duplicate").Inc()
		default:
			s.outcomes.WithLabelValues("evicted").Inc()
		}
	}
	return unknown, nil
}

// exists reports whether a workload subject holds any event. It is asked
// only when a fence failed, to tell a victim that moved on from one that
// never was.
func (s *Service) exists(ctx context.Context, subject string) (bool, error) {
	_, err := s.stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("last event on %s: %w", subject, err)
	}
	return true, nil
}
