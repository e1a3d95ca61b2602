package engine

import (
	"hash/fnv"

	"github.com/jetqueue/jetqueue/libs/api"
)

// Shard is the part of the cohort forest one admission shard decides. In
// Kueue v0.6 cohorts are flat, so a tree is one cohort (every ClusterQueue
// naming it) or a standalone ClusterQueue. Everything a decision reads or
// changes is in one tree: a head's quota, its borrowing and lending, its
// preemption victims (same ClusterQueue or same cohort). So trees decided
// by different shards never compete for quota, and a shard that owns a
// whole tree decides it exactly as the unsharded engine does.
//
// The engine of every shard stays a full replica: it applies every event,
// its peers' decisions as facts, and only its cycles are partitioned.
type Shard struct {
	// Index is this shard's number, in [0, Count).
	Index int
	// Count is how many shards there are; 0 or 1 means one shard, which
	// decides everything.
	Count int
}

// TreeOwner is the shard that decides a tree: FNV-1a (64 bit) of the
// cohort's name, or of the ClusterQueue's name for a standalone one,
// modulo the shard count. The hash is part of the cluster's contract:
// every instance must agree on it, so it never changes.
func TreeOwner(cohort, clusterQueue string, count int) int {
	if count <= 1 {
		return 0
	}
	name := clusterQueue
	if cohort != "" {
		name = cohort
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum64() % uint64(count))
}

// TreeKey names a tree: "cohort/<name>" or "clusterqueue/<name>".
func TreeKey(cohort, clusterQueue string) string {
	if cohort != "" {
		return "cohort/" + cohort
	}
	return "clusterqueue/" + clusterQueue
}

// SetShard limits this engine's cycles to the trees shard s owns; held,
// if set, names trees the shard owns but must not decide yet (a tree
// receiving a ClusterQueue whose previous owner has not released it).
// The zero Shard decides everything, as before.
func (e *Engine) SetShard(s Shard, held func(tree string) bool) {
	e.shard, e.heldTree = s, held
	e.changes++
	e.invalidateFingerprint()
}

// Sharded reports whether the engine decides only part of the forest.
func (e *Engine) Sharded() bool { return e.shard.Count > 1 }

// Owns reports whether this engine's shard decides a ClusterQueue now: it
// owns the ClusterQueue's tree and the tree is not held. A ClusterQueue
// not configured (deleted) is decided by the owner of its name.
func (e *Engine) Owns(cq string) bool {
	if e.shard.Count <= 1 {
		return true
	}
	cohort := ""
	if c := e.clusterQueues[cq]; c != nil {
		cohort = c.Spec.Cohort
	}
	if TreeOwner(cohort, cq, e.shard.Count) != e.shard.Index {
		return false
	}
	return e.heldTree == nil || !e.heldTree(TreeKey(cohort, cq))
}

// OwnerOf is the shard that owns a ClusterQueue's tree by configuration.
func (e *Engine) OwnerOf(cq string) int {
	cohort := ""
	if c := e.clusterQueues[cq]; c != nil {
		cohort = c.Spec.Cohort
	}
	return TreeOwner(cohort, cq, e.shard.Count)
}

// CohortOf is a configured ClusterQueue's cohort ("" if standalone or
// unknown).
func (e *Engine) CohortOf(cq string) string {
	if c := e.clusterQueues[cq]; c != nil {
		return c.Spec.Cohort
	}
	return ""
}

// ClusterQueue returns a configured ClusterQueue, or nil.
func (e *Engine) ClusterQueue(name string) *api.ClusterQueue { return e.clusterQueues[name] }

// blockedBySharding reports whether this shard must decide nothing:
// waitForPodsReady.blockAdmission stops every admission in the cluster
// while any admitted workload is not ready, a rule over all trees at once
// that shards deciding in parallel cannot keep (two of them could each
// admit one workload while the other's is not ready).
func (e *Engine) blockedBySharding() bool {
	return e.shard.Count > 1 && e.podsReady.Enable && e.podsReady.BlockAdmission
}

// ClusterQueueNames lists the configured ClusterQueues, sorted.
func (e *Engine) ClusterQueueNames() []string { return sortedKeys(e.clusterQueues) }

// BlockedBySharding reports whether this shard decides nothing because
// waitForPodsReady.blockAdmission is on (see blockedBySharding).
func (e *Engine) BlockedBySharding() bool { return e.blockedBySharding() }
