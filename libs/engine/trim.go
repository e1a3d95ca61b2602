package engine

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// Unreachable names the pending workloads that no run at now can reach:
// a counterfactual probe copies the engine many times (CloneWithout
// leaves them out of a copy), and behind a long StrictFIFO backlog most of
// it is workloads no run will ever try. It only reads e.
//
// In a StrictFIFO ClusterQueue the head blocks the queue until it is
// admitted, so a workload is admitted only when every workload queued
// ahead of it holds quota too: each was admitted before it, and one
// evicted since (preempted) went back into the queue ahead of it. With
// waitForPodsReady off nothing else takes a workload out of the queue
// for good during a run. So the first workload b for which the workloads
// queued ahead of it and b itself, counted at their smallest requests
// (minCount pods), need more of some resource than its cohort's nominal
// quotas hold together (no usage ever exceeds them) is never admitted,
// and blocks everything queued behind it: those are unreachable. Counted at
// nothing (which only moves b later) are what may be passed over without
// blocking: parked workloads, those whose backoff lasts past now,
// misconfigured ones, those of a namespace the queue does not select,
// finished ones still queued, resources the queue does not cover; and
// keep, which is never unreachable.
//
// A run at now of a copy without them decides as one of e would, also
// after any of these changes: a workload finishing, keep's priority
// changing, keep deleted and submitted again, a borrowingLimit or a
// lendingLimit changing. Not after others: a nominalQuota raised (the
// bound grows), another workload's priority changed, deleted or
// deactivated (the workloads ahead of b would change).
// TestTrimDecidesAsTheWhole checks it.
func (e *Engine) Unreachable(keep string, now time.Time) map[string]bool {
	if e.podsReady.Enable || e.pass != nil {
		return nil
	}
	// The nominal quotas of each cohort (or queue without one), of every
	// ClusterQueue, active or not: more than any run can use.
	capacity := map[string]map[corev1.ResourceName]int64{}
	for name, c := range e.compiled {
		g := e.triedGroup(name)
		if capacity[g] == nil {
			capacity[g] = map[corev1.ResourceName]int64{}
		}
		for fr, l := range c.Limits {
			capacity[g][fr.Resource] = quota.SatAdd(capacity[g][fr.Resource], l.Nominal)
		}
	}
	var drop map[string]bool
	for _, name := range sortedKeys(e.clusterQueues) {
		cq := e.compiled[name]
		q := e.queues.Lookup(name)
		if cq == nil || q == nil || cq.Strategy != api.StrictFIFO {
			continue
		}
		limit := capacity[e.triedGroup(name)]
		need := map[corev1.ResourceName]int64{}
		blocked := false
		for _, it := range q.Ordered() {
			v := it.Workload
			w := e.workloads[v.Key]
			if blocked {
				if v.Key != keep && w != nil && w.Status == Pending && w.Info == v {
					if drop == nil {
						drop = map[string]bool{}
					}
					drop[v.Key] = true
				}
				continue
			}
			if w == nil || w.Status != Pending || w.Info != v || v.Key == keep ||
				it.Parked || now.Before(it.NotBefore) || v.Misconfigured != "" ||
				cq.NamespaceSelector != nil && !cq.NamespaceSelector.Matches(v.NamespaceLabels) {
				continue
			}
			for _, ps := range v.PodSets {
				count := int64(ps.Count)
				if ps.MinCount != nil {
					count = min(count, int64(*ps.MinCount))
				}
				for r, per := range ps.PerPod {
					if _, covered := cq.GroupOf[r]; !covered {
						continue
					}
					n, ok := quota.MulInt(per, count)
					if !ok {
						n = math.MaxInt64
					}
					need[r] = quota.SatAdd(need[r], n)
					blocked = blocked || need[r] > limit[r]
				}
			}
		}
	}
	return drop
}

// CloneWithout is Clone leaving out the pending workloads drop names
// (Unreachable's); a workload drop names that is not pending is copied.
func (e *Engine) CloneWithout(drop map[string]bool) *Engine { return e.clone(drop) }
