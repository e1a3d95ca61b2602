package admission

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// Preemption requests: the evictions a request asks for, kept until the
// log shows them, and the request checked again against the log before
// it is published.

// noteRequested keeps the evictions another instance's preemption request
// asks for, of the victims still where it chose them.
func (s *Service) noteRequested(req events.Event, d *events.PreemptionRequestedData) {
	if s.sharded() && s.eng.OwnerOf(d.ClusterQueue) != s.shard {
		// Another shard's preemption: its leaders adopt it. If its
		// ClusterQueue is handed over to this shard, the victims hold
		// their quota here until their evictions arrive.
		return
	}
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
		if events.Ends(ev.Type) {
			return false, nil
		}
	}
	return false, fmt.Errorf("%w: %s on a victim awaiting eviction", errResync, ev.Type)
}

// victimsStill checks a preemption request against the log read since it
// was decided, and against this run's own publications since: a victim
// admitted earlier in the same run is chosen at its sequence before that
// admission, which the preemptor's fence would refuse, and admission
// would then wait for good for an eviction that never comes. So it is
// called only once every decision before the request is published.
//
// A request held while an earlier one's evictions came in was decided on
// an older state: a victim that finished or was deleted since needs no
// eviction (its quota is free already), and the preemptor would never
// evict it (its fence is the victim's sequence when chosen), so waiting
// for that eviction would stall admission for good. Such victims are
// dropped from the request; nil means none is left and the request is
// not published. A victim that changed any other way (ready pods, a new
// priority, another eviction) means the engine is ahead of the log: the
// log is replayed and the decision made again.
func (s *Service) victimsStill(req events.Event) (*events.Event, error) {
	d := req.Data.(*events.PreemptionRequestedData)
	kept := *d
	kept.Victims = nil
	for _, v := range d.Victims {
		subject := events.WorkloadSubject(v.Namespace, v.Name)
		if seq, ok := s.chain[subject]; ok {
			// This run published about the victim after choosing it.
			v.Seq = seq
		}
		if s.onSubj[subject] == v.Seq {
			kept.Victims = append(kept.Victims, v)
			continue
		}
		if w := s.eng.Workload(replay.Key(v.WorkloadRef)); w != nil && w.Status != engine.Finished {
			return nil, fmt.Errorf("%w: victim %s/%s changed before its preemption was published", errResync, v.Namespace, v.Name)
		}
	}
	if len(kept.Victims) == 0 {
		return nil, nil
	}
	req.Data = &kept
	return &req, nil
}
