package admission

// Snapshots of the admission state (libs/snapshot). A snapshot is always a
// fold of the log and nothing else: the state an instance has after
// reading events 1…Jq-Seq without deciding (a standby's state). It never
// holds a decision that is not in the log, so whoever wrote it (an old
// leader, a standby) it can only restore what the log says.
//
//   - Before an instance decides for the first time after (re)reading the
//     log, its own state is such a fold: it encodes it directly.
//   - Once it has decided, its engine holds what its runs did (parked
//     workloads, retry states) on top of the log: it snapshots by
//     compaction instead, in the background, with a second, private copy
//     of the state: the newest stored snapshot (or nothing) plus the
//     events after it, read from JQ_EVENTS up to where the instance is.
//
// A fold is encoded only at a quiet point: no batch still arriving, no
// preemption request of another leader whose evictions are still to
// come. On start, follow restores the newest usable snapshot and reads
// from Jq-Seq+1; an instance decides only once it has read to the end of
// the stream, so it never acts on a state older than what it (or any
// other leader) has published.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// snapshotVersion is the version of the admission snapshot: the engine's
// encoding version and this envelope's.
const snapshotVersion = engine.SnapshotVersion*100 + 3

// snapState is the admission snapshot's envelope. The payload is the
// envelope's JSON, a newline, then the engine's snapshot (JSON holds no
// raw newline), so that the engine's bytes, most of a snapshot, are
// neither copied nor scanned twice.
type snapState struct {
	OnSubj map[string]uint64    `json:"onSubj"`
	Closed map[string]time.Time `json:"closed,omitempty"`
	Seen   time.Time            `json:"seen"`
	// AdmittedIn and EvictedAt are the observer's (observe.go), so that
	// Kueue's eviction counters and wait times go on exactly after a
	// restore: where each workload holding quota holds it (ClusterQueue,
	// namespace, LocalQueue), and when each was last evicted.
	AdmittedIn map[string][3]string `json:"admittedIn,omitempty"`
	EvictedAt  map[string]time.Time `json:"evictedAt,omitempty"`
	// Trees and Handovers are a shard's (shard.go): each ClusterQueue's
	// last tree, and the moves between shards not yet released.
	Trees     map[string]string          `json:"trees,omitempty"`
	Handovers []events.ShardReleasedData `json:"handovers,omitempty"`
}

// quiet reports whether the instance's state is a fold of the log that a
// snapshot can hold.
func (s *Service) quiet() bool {
	return len(s.open) == 0 && len(s.requested) == 0 && len(s.held) == 0 && len(s.awaiting) == 0 && len(s.mine) == 0
}

// encodeState renders a quiet fold, calling rest, if not nil, between
// pieces of the work (see compact).
func (s *Service) encodeState(rest func() error) ([]byte, error) {
	eng, err := s.eng.EncodeSnapshotPaced(rest)
	if err != nil {
		return nil, err
	}
	st := snapState{OnSubj: s.onSubj, Closed: s.closed, Seen: s.seen, EvictedAt: s.obs.evictedAt}
	if s.sharded() {
		st.Trees, st.Handovers = s.trees, s.handovers
	}
	if len(s.obs.admittedIn) > 0 {
		st.AdmittedIn = make(map[string][3]string, len(s.obs.admittedIn))
		for k, r := range s.obs.admittedIn {
			st.AdmittedIn[k] = [3]string{r.clusterQueue, r.namespace, r.localQueue}
		}
	}
	head, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return slices.Concat(head, []byte{'\n'}, eng), nil
}

// restoreState replaces the state with a snapshot's, or leaves it as it
// is and returns why not.
func (s *Service) restoreState(sn *snapshot.Snapshot, rest func() error) error {
	head, eng, ok := bytes.Cut(sn.Payload, []byte{'\n'})
	if !ok {
		return fmt.Errorf("admission snapshot: no engine state")
	}
	var st snapState
	if err := json.Unmarshal(head, &st); err != nil {
		return fmt.Errorf("admission snapshot: %w", err)
	}
	e, err := engine.DecodeSnapshotPaced(eng, rest)
	if err != nil {
		return err
	}
	for subj, seq := range st.OnSubj {
		if seq == 0 || seq > sn.Seq {
			return fmt.Errorf("admission snapshot: subject %s at %d, beyond the snapshot's %d", subj, seq, sn.Seq)
		}
	}
	if st.OnSubj == nil {
		st.OnSubj = map[string]uint64{}
	}
	if st.Closed == nil {
		st.Closed = map[string]time.Time{}
	}
	e.RecordDecisions()
	s.eng, s.onSubj, s.closed, s.seen, s.last = e, st.OnSubj, st.Closed, st.Seen, sn.Seq
	s.trees, s.handovers = st.Trees, st.Handovers
	if s.trees == nil {
		s.trees = map[string]string{}
	}
	s.restoreTrees()
	s.shardEngine()
	s.observeCycles()
	if s.obs.counted == 0 {
		// The observer has counted nothing in this process: it takes
		// the snapshot's state. Once it has, its own runs further than
		// the snapshot, and a replay does not count again.
		s.obs.admittedIn, s.obs.evictedAt = map[string]queueRef{}, st.EvictedAt
		if s.obs.evictedAt == nil {
			s.obs.evictedAt = map[string]time.Time{}
		}
		for k, r := range st.AdmittedIn {
			s.obs.admittedIn[k] = queueRef{clusterQueue: r[0], namespace: r[1], localQueue: r[2]}
		}
	}
	return nil
}

// maybeSnapshot writes a snapshot when the policy says one is due: from
// the instance's own state while it is a fold, else by compaction.
func (s *Service) maybeSnapshot(ctx context.Context) {
	w := s.snaps
	if !w.Due(s.last) {
		return
	}
	if !s.decided {
		if !s.quiet() {
			return
		}
		payload, err := s.encodeState(nil)
		if err != nil {
			w.Done(0, err)
			return
		}
		last := s.last
		w.Start(func() (uint64, error) { return last, w.Store.Save(ctx, last, payload) })
		return
	}
	target := s.last
	w.Start(func() (uint64, error) { return s.compact(ctx, target) })
}

// compact folds the newest stored snapshot (or nothing) and the events
// after it up to at least target, in a private copy of the state, and
// stores the result. It reads the log only: nothing the live instance
// decided and did not publish can enter it.
func (s *Service) compact(ctx context.Context, target uint64) (uint64, error) {
	shadow := &Service{cfg: s.cfg, log: zap.NewNop(), rt: &service.Runtime{Name: "admission-snapshot", Log: zap.NewNop()}, batch: s.batch,
		m: metrics.NewAdmission(nil), shard: s.shard, shards: s.shards}
	shadow.reset()
	began := time.Now()
	// The live instance keeps deciding meanwhile, on the same cores: the
	// compaction rests between pieces of its work so that it takes a
	// tenth of a core, not a whole one (or, decoding, every one).
	pace := snapshot.Pacer{Share: snapshot.CompactionShare}
	rested := s.snaps.Store.Metrics().CompactionRest
	rest := func() error {
		before := pace.Slept
		err := pace.Rest(ctx)
		rested.Add((pace.Slept - before).Seconds())
		return err
	}
	_ = rest()
	var start uint64
	if sn, err := s.snaps.Store.Load(ctx); err == nil && sn != nil && shadow.restoreState(sn, rest) == nil {
		start = sn.Seq
	} else {
		// Not usable (the live instance's start said why): from the start.
		shadow.reset()
	}
	if start >= target {
		return start, nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if start > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start + 1}
	}
	cons, err := bus.NewReader(ctx, s.js, events.Stream, cfg)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	defer cons.Close()
	for rest() == nil {
		caughtUp, err := shadow.consume(ctx, cons)
		if err != nil {
			return 0, fmt.Errorf("snapshot: %w", err)
		}
		if shadow.last >= target && shadow.quiet() {
			break
		}
		if caughtUp && shadow.last >= target {
			return 0, fmt.Errorf("snapshot: no quiet point after event %d yet", target)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	folded := time.Now()
	payload, err := shadow.encodeState(rest)
	if err != nil {
		return 0, err
	}
	encoded := time.Now()
	err = s.snaps.Store.SavePaced(ctx, shadow.last, payload, rest)
	s.log.Info("snapshot compacted", zap.Uint64("from", start), zap.Uint64("to", shadow.last),
		zap.Duration("restoreAndFold", folded.Sub(began)), zap.Duration("encode", encoded.Sub(folded)),
		zap.Duration("save", time.Since(encoded)), zap.Int("bytes", len(payload)), zap.Error(err))
	return shadow.last, err
}
