package admission

// Sharding (--shards N). Each shard owns the cohort trees engine.TreeOwner
// gives it (a cohort, or a standalone ClusterQueue), and its engine's
// cycles nominate only their heads; its engine stays a full replica,
// reading every event of JQ_EVENTS, its peers' decisions as facts.
// Workload subjects are per workload, not per tree, so no subject filter
// could select a tree's events: every shard reads every event.
//
// A ClusterQueue that a configuration event (at sequence S) moves into a
// tree of another shard is handed over through the log: the old owner,
// once it has applied S and published every decision it made before,
// publishes ShardReleased; the new owner decides nothing in the receiving
// tree until it has read the release. In log order every decision of the
// old owner about the ClusterQueue (or its lendable quota) precedes the
// release, so the new owner's replica holds all of them when it first
// decides the tree. Between S and the release exactly one shard, the old
// owner, may still publish about the ClusterQueue, and only decisions it
// made on the state before S.
//
// The handovers still open are part of the fold (every instance of every
// shard derives them from the log alone, and snapshots hold them), so a
// new leader of the old shard that finds one open publishes its release,
// under the same event id, which JetStream deduplicates.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
)

// sharded reports whether this instance is one of several shards.
func (s *Service) sharded() bool { return s.shards > 1 }

// shardEngine limits the engine's cycles to this shard's trees.
func (s *Service) shardEngine() {
	if s.sharded() {
		s.eng.SetShard(engine.Shard{Index: s.shard, Count: s.shards}, s.heldTree)
	}
}

// heldTree reports whether a tree waits for a release before this shard
// decides it.
func (s *Service) heldTree(tree string) bool {
	for _, h := range s.handovers {
		if h.ToShard == s.shard && h.To == tree {
			return true
		}
	}
	return false
}

// configuredCQ names the ClusterQueue a configuration event is about.
func configuredCQ(ev events.Event) (string, bool) {
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		return d.Name, d.Kind == "ClusterQueue"
	case *events.ConfigRef:
		return d.Name, d.Kind == "ClusterQueue"
	}
	return "", false
}

// noteTree records, after a configuration event at seq was applied, the
// tree of the ClusterQueue it is about, and opens a handover if the
// ClusterQueue moved to a tree of another shard. A deleted ClusterQueue
// keeps its last tree: its admitted workloads still hold quota there, and
// if it comes back in another shard's tree, the old owner's late
// decisions about it must come first all the same.
func (s *Service) noteTree(ev events.Event, seq uint64) {
	cq, ok := configuredCQ(ev)
	if !ok || !s.sharded() || s.eng.ClusterQueue(cq) == nil {
		return
	}
	was := s.trees[cq]
	now := engine.TreeKey(s.eng.CohortOf(cq), cq)
	s.trees[cq] = now
	if was == "" || was == now {
		return
	}
	from, to := s.ownerOfTree(was, cq), s.eng.OwnerOf(cq)
	if from == to {
		return
	}
	s.handovers = append(s.handovers, events.ShardReleasedData{ClusterQueue: cq, From: was, To: now,
		FromShard: from, ToShard: to, AtSeq: seq})
	s.log.Info("ClusterQueue moves to another shard's tree", zap.String("clusterQueue", cq),
		zap.String("from", was), zap.String("to", now), zap.Int("fromShard", from), zap.Int("toShard", to), zap.Uint64("seq", seq))
}

// ownerOfTree is the owner of a tree named by TreeKey.
func (s *Service) ownerOfTree(tree, cq string) int {
	if name, ok := strings.CutPrefix(tree, "cohort/"); ok {
		return engine.TreeOwner(name, cq, s.shards)
	}
	return engine.TreeOwner("", cq, s.shards)
}

// released closes the handover a ShardReleased read from the log names.
// A repeat (another leader's copy that JetStream did not deduplicate)
// closes nothing.
func (s *Service) released(d *events.ShardReleasedData) {
	n := len(s.handovers)
	s.handovers = slices.DeleteFunc(s.handovers, func(h events.ShardReleasedData) bool {
		return h.ClusterQueue == d.ClusterQueue && h.AtSeq == d.AtSeq
	})
	if len(s.handovers) != n && s.sharded() {
		// The receiving tree may be decided now: a new run.
		s.shardEngine()
	}
}

// releaseID is a handover's event id, the same for every leader of the
// old shard, so that JetStream keeps one release.
func releaseID(h events.ShardReleasedData) string {
	return fmt.Sprintf("admission/shard-released/%s/%d", h.ClusterQueue, h.AtSeq)
}

// publishReleases publishes the releases this shard owes. It is called
// by the leader, caught up with the log (so past every move it owes), and
// only when no decision it made is still unpublished: every decision it
// made before a move is then in the log, ahead of the release.
func (s *Service) publishReleases(ctx context.Context) error {
	for _, h := range s.handovers {
		if h.FromShard != s.shard || s.sentRelease[releaseID(h)] {
			continue
		}
		if err := s.leader.Check(ctx); err != nil {
			return err
		}
		data := h
		ev := events.Event{ID: releaseID(h), Type: events.ShardReleased, Source: source, Time: s.now(ctx),
			Subject: events.ShardSubject, Data: &data}
		if _, _, err := bus.Publish(ctx, s.js, ev, nil); err != nil {
			return err
		}
		s.sentRelease[releaseID(h)] = true
		s.log.Info("ClusterQueue released to its new shard", zap.String("clusterQueue", h.ClusterQueue),
			zap.Int("toShard", h.ToShard), zap.Uint64("seq", h.AtSeq))
	}
	return nil
}

// restoreTrees fills the trees of the configured ClusterQueues a snapshot
// did not list (one written by a single shard, which keeps none).
func (s *Service) restoreTrees() {
	if !s.sharded() {
		return
	}
	for _, cq := range s.eng.ClusterQueueNames() {
		if s.trees[cq] == "" {
			s.trees[cq] = engine.TreeKey(s.eng.CohortOf(cq), cq)
		}
	}
}
