package engine

import (
	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Stats is what Kueue's queue-system and cache gauges report, read off
// the engine at one instant: plain values, so that a service can hand
// them to a metrics collector on another goroutine.
type Stats struct {
	ClusterQueues []ClusterQueueStats
	LocalQueues   []LocalQueueStats
	// Unadmitted counts the workloads not holding quota (pending or
	// deactivated) by where they are headed and why (see UnderlyingCause).
	Unadmitted map[UnadmittedKey]int
}

// ClusterQueueStats is one ClusterQueue's gauges.
type ClusterQueueStats struct {
	Name, Cohort string
	// Status is Kueue's: "active", "pending" (inactive: a missing flavor,
	// stopped) or "terminating" (deleted while workloads still hold its
	// quota).
	Status string
	// PendingActive are the pending workloads in its heap, PendingInadmissible
	// those parked as inadmissible.
	PendingActive, PendingInadmissible int
	// Reserving counts the workloads holding its quota.
	Reserving int
	Quotas    []QuotaStats
	// Usage is what its admitted workloads hold, per flavor and resource.
	Usage quota.Usage
}

// QuotaStats is one flavor/resource cell of a ClusterQueue's spec, in
// Kueue's integer units; a nil limit is unset.
type QuotaStats struct {
	quota.FlavorResource
	Nominal                 int64
	BorrowingLimit, Lending *int64
}

// LocalQueueStats is one LocalQueue's gauges.
type LocalQueueStats struct {
	Namespace, Name, ClusterQueue string
	// Active is whether it is not stopped and its ClusterQueue exists and
	// is active.
	Active                             bool
	PendingActive, PendingInadmissible int
	Reserving                          int
	Usage                              quota.Usage
}

// UnadmittedKey groups unadmitted workloads as Kueue's
// kueue_unadmitted_workloads does.
type UnadmittedKey struct {
	ClusterQueue, Namespace, LocalQueue string
	Cause                               string
}

// UnderlyingCause maps a pending workload's reason to the tier of Kueue's
// QuotaReserved reasons (KEP-10852) that kueue_unadmitted_workloads
// reports as underlying_cause. A workload never tried yet is
// PendingEvaluation.
func UnderlyingCause(r *scheduler.Reason) string {
	if r == nil {
		return "PendingEvaluation"
	}
	switch r.Token {
	case scheduler.ExceedsMaxQuota:
		return "ExceedsMaxQuota"
	case scheduler.NoMatchingFlavor, scheduler.Misconfigured, scheduler.ClusterQueueNotFound,
		scheduler.LocalQueueNotFound, scheduler.NamespaceMismatch:
		return "Misconfigured"
	case scheduler.ClusterQueueInactive, scheduler.LocalQueueStopped:
		return "Suspended"
	case scheduler.WaitingForPodsReady:
		return "WaitingForPodsReady"
	default:
		return "WaitingForQuota"
	}
}

// checkStats, set by the package's tests, is called at the start of every
// run to check Stats against a walk over every workload.
var checkStats func(*Engine)

// Stats reads the gauges' values. It does not change the engine.
func (e *Engine) Stats() Stats {
	st := Stats{Unadmitted: map[UnadmittedKey]int{}}
	lqs := map[[2]string]*LocalQueueStats{}
	var lqOrder [][2]string
	for _, key := range sortedKeys(e.localQueues) {
		lq := e.localQueues[key]
		cq := lq.Spec.ClusterQueue
		active := e.clusterQueues[cq] != nil && e.inactive[cq] == "" && lqStopPolicy(lq) == api.StopPolicyNone
		k := [2]string{lq.Namespace, lq.Name}
		lqOrder = append(lqOrder, k)
		lqs[k] = &LocalQueueStats{Namespace: lq.Namespace, Name: lq.Name, ClusterQueue: cq, Active: active, Usage: quota.Usage{}}
	}
	cqs := map[string]*ClusterQueueStats{}
	for _, name := range sortedKeys(e.clusterQueues) {
		cq := e.clusterQueues[name]
		s := &ClusterQueueStats{Name: name, Cohort: cq.Spec.Cohort, Status: "active", Usage: quota.Usage{}}
		if e.inactive[name] != "" {
			s.Status = "pending"
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					q := QuotaStats{FlavorResource: quota.FlavorResource{Flavor: f.Name, Resource: r.Name},
						Nominal: quota.Value(r.Name, r.NominalQuota)}
					if r.BorrowingLimit != nil {
						v := quota.Value(r.Name, *r.BorrowingLimit)
						q.BorrowingLimit = &v
					}
					if r.LendingLimit != nil {
						v := quota.Value(r.Name, *r.LendingLimit)
						q.Lending = &v
					}
					s.Quotas = append(s.Quotas, q)
				}
			}
		}
		cqs[name] = s
	}
	// A deleted ClusterQueue whose admitted workloads still hold quota is
	// terminating, as in Kueue.
	for _, name := range sortedKeys(e.usage) {
		if cqs[name] == nil && len(e.usage[name].admitted) > 0 {
			cqs[name] = &ClusterQueueStats{Name: name, Status: "terminating", Usage: quota.Usage{}}
		}
	}
	// Kept as workloads are admitted and released (cqState, lqUse), so
	// that the gauges cost the queues and the unadmitted workloads, not
	// every workload.
	for name, cq := range cqs {
		if u := e.usage[name]; u != nil && len(u.admitted) > 0 {
			cq.Reserving, cq.Usage = len(u.admitted), inUse(u.total)
		}
	}
	for k, lq := range lqs {
		if u := e.lqUse[k]; u != nil {
			lq.Reserving, lq.Usage = u.reserving, inUse(u.total)
		}
	}
	for key, w := range e.pending {
		lq := lqs[[2]string{w.Object.Namespace, w.Object.Spec.QueueName}]
		if q := e.queues.Lookup(w.queuedIn); w.queuedIn != "" && q != nil {
			parked := q.Parked(key)
			if cq := cqs[w.queuedIn]; cq != nil {
				if parked {
					cq.PendingInadmissible++
				} else {
					cq.PendingActive++
				}
			}
			if lq != nil {
				if parked {
					lq.PendingInadmissible++
				} else {
					lq.PendingActive++
				}
			}
		}
		st.Unadmitted[UnadmittedKey{ClusterQueue: w.Info.ClusterQueue, Namespace: w.Object.Namespace,
			LocalQueue: w.Object.Spec.QueueName, Cause: e.cause(w)}]++
	}
	for _, w := range e.deactivated {
		st.Unadmitted[UnadmittedKey{ClusterQueue: w.Info.ClusterQueue, Namespace: w.Object.Namespace,
			LocalQueue: w.Object.Spec.QueueName, Cause: "Deactivated"}]++
	}
	for _, name := range sortedKeys(cqs) {
		st.ClusterQueues = append(st.ClusterQueues, *cqs[name])
	}
	for _, k := range lqOrder {
		st.LocalQueues = append(st.LocalQueues, *lqs[k])
	}
	return st
}

// inUse copies a usage without its zero cells: a gauge per cell a
// workload holds some of.
func inUse(u quota.Usage) quota.Usage {
	out := make(quota.Usage, len(u))
	for k, v := range u {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// cause is a pending workload's underlying cause. A queue that cannot
// admit outranks waiting: a stopped one (stopPolicy) makes its workloads
// Suspended, one missing a flavor or an admission check Misconfigured,
// unless the workload's own reason is structural already.
func (e *Engine) cause(w *Workload) string {
	c := UnderlyingCause(w.Reason)
	cq := e.clusterQueues[w.Info.ClusterQueue]
	if cq == nil || e.inactive[cq.Name] == "" || c == "Misconfigured" || c == "ExceedsMaxQuota" {
		return c
	}
	if stopPolicy(cq) != api.StopPolicyNone {
		return "Suspended"
	}
	return "Misconfigured"
}
