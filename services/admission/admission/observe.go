package admission

import (
	"time"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// observer turns the log into Kueue's counters. Every instance follows
// the whole log, so every instance counts it, leader or standby, and the
// counters are a function of the log: kueue_admitted_workloads_total is
// the number of QuotaReserved events read since the process started. A
// replay of the log (a resync, a lost lease) does not count again what
// was counted already.
type observer struct {
	// counted is the highest sequence counted; replayed is its value when
	// the current replay started.
	counted, replayed uint64
	// admittedIn is where each workload holding quota holds it, for its
	// eviction; evictedAt when it was last evicted, which starts its wait
	// again (Kueue times the wait from the Evicted condition).
	admittedIn map[string]queueRef
	evictedAt  map[string]time.Time
	// statsAt is when the gauges were last computed, statsSeq the
	// sequence they were computed at, statsCost how long it took.
	statsAt   time.Time
	statsSeq  uint64
	statsCost time.Duration
}

type queueRef struct{ clusterQueue, namespace, localQueue string }

// count folds one event of the log, read at seq, into the counters, before
// it is applied to the engine.
func (s *Service) count(seq uint64, ev events.Event) {
	o := &s.obs
	if seq <= o.replayed {
		return
	}
	o.counted = max(o.counted, seq)
	if o.admittedIn == nil {
		o.admittedIn, o.evictedAt = map[string]queueRef{}, map[string]time.Time{}
	}
	s.m.Applied()
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		delete(o.evictedAt, replay.Key(d.WorkloadRef))
	case *events.QuotaReservedData:
		key := replay.Key(d.WorkloadRef)
		w := s.eng.Workload(key)
		if w == nil {
			return
		}
		ref := queueRef{clusterQueue: d.Admission.ClusterQueue, namespace: w.Object.Namespace, localQueue: w.Object.Spec.QueueName}
		o.admittedIn[key] = ref
		since := w.Info.Created
		if t, ok := o.evictedAt[key]; ok {
			since = t
		}
		s.m.QuotaReserved(ref.clusterQueue, ref.namespace, ref.localQueue, ev.Time.Sub(since))
	case *events.EvictedData:
		key := replay.Key(d.WorkloadRef)
		o.evictedAt[key] = ev.Time
		if ref, ok := o.admittedIn[key]; ok {
			delete(o.admittedIn, key)
			s.m.Evicted(ref.clusterQueue, ref.namespace, ref.localQueue, d.Reason)
		}
	case *events.PreemptionRequestedData:
		for _, v := range d.Victims {
			s.m.Preempted(d.ClusterQueue, string(v.Kind))
		}
	case *events.ActiveChangedData:
		// Deactivated while admitted: Kueue's InactiveWorkload eviction.
		key := replay.Key(d.WorkloadRef)
		if ref, ok := o.admittedIn[key]; ok && !d.Active {
			delete(o.admittedIn, key)
			o.evictedAt[key] = ev.Time
			s.m.Evicted(ref.clusterQueue, ref.namespace, ref.localQueue, engine.EvictedByDeactivation)
		}
	case *events.WorkloadFinishedData:
		delete(o.admittedIn, replay.Key(d.WorkloadRef))
	case *events.WorkloadRef:
		if events.Ends(ev.Type) {
			key := replay.Key(*d)
			delete(o.admittedIn, key)
			delete(o.evictedAt, key)
		}
	}
}

// observeCycles has the engine report each scheduling cycle that took
// heads as one of Kueue's admission attempts, timed on the wall clock from
// the end of the previous one (or the start of the run).
func (s *Service) observeCycles() {
	s.eng.ObserveCycles(func(res engine.CycleResult) {
		now := s.cfg.Wall()
		s.m.Attempt(len(res.Admitted) > 0, now.Sub(s.cycleStart))
		s.cycleStart = now
	})
}

// publishStats hands the engine's gauges to the metrics, when the engine
// moved since the last time, at most every 100ms of wall time, and at
// most every ten times as long as the last computation took: computing
// them walks every workload on the deciding goroutine, so with tens of
// thousands live this keeps it to a tenth of admission's time.
func (s *Service) publishStats() {
	o := &s.obs
	now := s.cfg.Wall()
	if o.statsSeq == s.last && !o.statsAt.IsZero() || now.Sub(o.statsAt) < max(100*time.Millisecond, 10*o.statsCost) {
		return
	}
	o.statsSeq = s.last
	s.m.SetStats(s.eng.Stats())
	o.statsAt = s.cfg.Wall()
	o.statsCost = o.statsAt.Sub(now)
}
