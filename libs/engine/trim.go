package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Trim removes from e the pending workloads that no run at now can reach,
// and returns how many it removed: a counterfactual probe copies the
// engine many times, and behind a long StrictFIFO backlog most of it is
// workloads no run will ever try.
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
// and blocks everything queued behind it: those are removed. Counted at
// nothing (which only moves b later) are what may be passed over without
// blocking: parked workloads, those whose backoff lasts past now,
// misconfigured ones, those of a namespace the queue does not select,
// finished ones still queued, resources the queue does not cover; and
// keep, which is never removed.
//
// A run of the trimmed engine at now decides as one of e would, also
// after any of these changes: a workload finishing, keep's priority
// changing, keep deleted and submitted again, a borrowingLimit or a
// lendingLimit changing. Not after others: a nominalQuota raised (the
// bound grows), another workload's priority changed, deleted or
// deactivated (the workloads ahead of b would change).
// TestTrimDecidesAsTheWhole checks it.
func (e *Engine) Trim(keep string, now time.Time) int {
	if e.podsReady.Enable || e.pass != nil {
		return 0
	}
	snap := e.Snapshot()
	var drop []*Workload
	for _, name := range sortedKeys(e.clusterQueues) {
		cq := snap.ClusterQueues[name]
		q := e.queues.Lookup(name)
		if cq == nil || q == nil || cq.Strategy != api.StrictFIFO {
			continue
		}
		members := []*scheduler.ClusterQueue{cq}
		if cq.Cohort != nil {
			members = cq.Cohort.Members
		}
		capacity := map[corev1.ResourceName]int64{}
		for _, m := range members {
			for fr, l := range m.Limits {
				capacity[fr.Resource] = quota.SatAdd(capacity[fr.Resource], l.Nominal)
			}
		}
		need := map[corev1.ResourceName]int64{}
		blocked := false
		for _, it := range q.Ordered() {
			v := it.Workload
			if blocked {
				if v.Key != keep {
					if w := e.workloads[v.Key]; w != nil && w.Status == Pending && w.Info == v {
						drop = append(drop, w)
					}
				}
				continue
			}
			if w := e.workloads[v.Key]; w == nil || w.Status != Pending || w.Info != v || v.Key == keep ||
				it.Parked || now.Before(it.NotBefore) || v.Misconfigured != "" ||
				cq.NamespaceSelector != nil && !cq.NamespaceSelector.Matches(labels.Set(v.NamespaceLabels)) {
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
						n = 1<<63 - 1
					}
					need[r] = quota.SatAdd(need[r], n)
					blocked = blocked || need[r] > capacity[r]
				}
			}
		}
	}
	for _, w := range drop {
		e.queues.Delete(w.Info.ClusterQueue, w.Info.Key)
		delete(e.workloads, w.Info.Key)
		delete(e.pending, w.Info.Key)
		if m := e.triedHashed[w.hashGroup]; m[w.Info.Key] == w {
			delete(m, w.Info.Key)
		}
	}
	if len(drop) > 0 {
		// The fingerprint is hashed afresh; the kept scheduler snapshot
		// holds no pending workload.
		e.fpValid = false
		clear(e.fpTouched)
		e.fpTouched = e.fpTouched[:0]
		e.settled = false
	}
	return len(drop)
}
