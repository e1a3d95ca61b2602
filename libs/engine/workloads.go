package engine

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// ErrExists is returned when a workload with the same key already exists.
var ErrExists = fmt.Errorf("already exists")

// Submit adds a validated workload created at the given time. It is routed
// to its ClusterQueue through its LocalQueue; a workload whose LocalQueue
// or ClusterQueue does not exist yet waits until it does.
func (e *Engine) Submit(wl *api.Workload, created time.Time) (*Workload, error) {
	e.changes++
	key := api.NamespacedName(wl.Namespace, wl.Name)
	if e.workloads[key] != nil {
		return nil, fmt.Errorf("workload %s: %w", key, ErrExists)
	}
	info := buildInfo(wl, key, created, e.namespaceLabels(wl.Namespace))
	e.shareRequests(info)
	return e.add(&Workload{Object: withoutTemplates(wl), Info: info, adjusted: limitsWithoutRequests(wl)}, created), nil
}

// Resubmit deletes a workload and submits it again, created now, with
// edit (if any) applied to a copy of its podSets: a workload's spec is
// not updated in place, so that is how a user changes one, and the
// front door stamps the new one created now, behind the workloads of its
// queue. What-if probes use it, as the engine keeps the scheduler's view
// of the podSets rather than their templates.
func (e *Engine) Resubmit(key string, now time.Time, edit func([]scheduler.PodSet)) error {
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	pss := slices.Clone(w.Info.PodSets)
	for i := range pss {
		pss[i].Tolerations = slices.Clone(pss[i].Tolerations)
	}
	if edit != nil {
		edit(pss)
	}
	if err := e.Delete(key, now); err != nil {
		return err
	}
	e.changes++
	info := newInfo(w.Object, key, now, e.namespaceLabels(w.Object.Namespace))
	info.PodSets, info.Misconfigured = pss, w.Info.Misconfigured
	e.add(&Workload{Object: w.Object, Info: info, adjusted: w.adjusted}, now)
	return nil
}

// add starts a new workload's life: pending, routed to its ClusterQueue.
func (e *Engine) add(w *Workload, created time.Time) *Workload {
	e.workloads[w.Info.Key] = w
	e.touch(w)
	e.setStatus(w, Pending)
	if wl := w.Object; wl.Spec.Active != nil && !*wl.Spec.Active {
		// Kueue's workload controller marks a workload that is created
		// inactive evicted (reason InactiveWorkload), and that status
		// update is handled as any update of an inactive workload: the
		// parked workloads of its LocalQueue's ClusterQueue and cohort
		// are requeued (WorkloadReconciler.Reconcile, then Update).
		e.setStatus(w, Inactive)
		e.evictions = append(e.evictions, Eviction{Key: w.Info.Key, Reason: EvictedByDeactivation, At: created})
		e.updated(w, created)
		e.wake(created)
		return w
	}
	e.route(w, created)
	return w
}

// namespaceLabels are a namespace's labels: without Namespace objects, the
// only one is the label Kubernetes always sets. One set per namespace is
// shared by its workloads, which only read it.
func (e *Engine) namespaceLabels(ns string) labels.Set {
	l := e.nsLabels[ns]
	if l == nil {
		l = labels.Set{corev1.LabelMetadataName: ns}
		e.nsLabels[ns] = l
	}
	return l
}

// buildInfo derives the scheduler's view of a workload.
func buildInfo(wl *api.Workload, key string, created time.Time, nsLabels labels.Set) *scheduler.Workload {
	info := newInfo(wl, key, created, nsLabels)
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		spec := &ps.Template.Spec
		p := scheduler.PodSet{
			Name:         ps.Name,
			Count:        ps.Count,
			MinCount:     ps.MinCount,
			PerPod:       api.PodRequests(spec),
			NodeSelector: spec.NodeSelector,
			Tolerations:  spec.Tolerations,
		}
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
			p.Affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if field, msg, bad := api.RequestsExceedLimits(spec); bad && info.Misconfigured == "" {
			info.Misconfigured = fmt.Sprintf("resource validation failed: podSets[%s].%s: %s", ps.Name, field, msg)
		}
		info.PodSets = append(info.PodSets, p)
	}
	return info
}

// route finds the workload's ClusterQueue and queues it, or records why it
// cannot be queued yet.
func (e *Engine) route(w *Workload, now time.Time) {
	cq, reason := e.target(w.Object)
	w.Info.ClusterQueue = cq
	w.queuedIn = ""
	if reason != nil {
		w.Reason = reason
		// The workload reconcile writes it as an Inadmissible condition.
		w.condPending = false
		if reason.Token == scheduler.LocalQueueStopped {
			// The next cycle records it (stopLocalQueue): Kueue's
			// workload controller writes this one.
			e.toDrain[api.NamespacedName(w.Object.Namespace, w.Object.Spec.QueueName)] = true
		}
		return
	}
	w.Reason = nil
	w.queuedIn = cq
	e.queues.Push(&queue.Entry{Workload: w.Info}, true, now)
}

func (e *Engine) target(wl *api.Workload) (string, *scheduler.Reason) {
	lq := e.localQueues[api.NamespacedName(wl.Namespace, wl.Spec.QueueName)]
	if lq == nil {
		return "", &scheduler.Reason{Token: scheduler.LocalQueueNotFound,
			Message: fmt.Sprintf("LocalQueue %s doesn't exist", wl.Spec.QueueName)}
	}
	if lqStopPolicy(lq) != api.StopPolicyNone {
		// Kueue drops a stopped LocalQueue from its queues
		// (LocalQueueReconciler.Update: DeleteLocalQueue) and its workload
		// controller writes QuotaReserved False, reason Inadmissible,
		// "LocalQueue NAME is stopped" (reconcileOnLocalQueueActiveState).
		return lq.Spec.ClusterQueue, &scheduler.Reason{Token: scheduler.LocalQueueStopped,
			Message: fmt.Sprintf("LocalQueue %s is stopped", wl.Spec.QueueName)}
	}
	if e.clusterQueues[lq.Spec.ClusterQueue] == nil {
		return lq.Spec.ClusterQueue, &scheduler.Reason{Token: scheduler.ClusterQueueNotFound,
			Message: fmt.Sprintf("ClusterQueue %s doesn't exist", lq.Spec.ClusterQueue)}
	}
	return lq.Spec.ClusterQueue, nil
}

// reroute re-evaluates the route of every pending workload after a
// LocalQueue or ClusterQueue change.
func (e *Engine) reroute(now time.Time) {
	for _, key := range sortedKeys(e.workloads) {
		w := e.workloads[key]
		if w.listed {
			e.relist(w, now)
			continue
		}
		if w.Status != Pending || e.waitingBackoff(w) {
			continue
		}
		cq, reason := e.target(w.Object)
		if reason == nil && cq == w.queuedIn {
			continue
		}
		if w.queuedIn != "" {
			e.queues.Delete(w.queuedIn, key)
		}
		e.route(w, now)
	}
}

// relist queues a listed finished workload (see Workload.listed) while
// its LocalQueue and ClusterQueue exist, as Kueue's LocalQueue items are
// pushed to a ClusterQueue created later (Manager.AddClusterQueue).
func (e *Engine) relist(w *Workload, now time.Time) {
	cq, why := e.target(w.Object)
	switch {
	case why == nil && w.queuedIn == cq:
	case why == nil:
		if w.queuedIn != "" {
			e.queues.Delete(w.queuedIn, w.Info.Key)
		}
		w.Info.ClusterQueue, w.queuedIn = cq, cq
		e.finishedQueued[w.Info.Key] = w
		e.queues.Push(&queue.Entry{Workload: w.Info}, true, now)
	default:
		if why.Token == scheduler.LocalQueueNotFound {
			// Manager.DeleteLocalQueue forgets its items.
			e.dropFinished(w.Info.Key)
			return
		}
		if w.queuedIn != "" {
			e.queues.Delete(w.queuedIn, w.Info.Key)
			w.queuedIn = ""
		}
		delete(e.finishedQueued, w.Info.Key)
	}
}

// Finish marks a workload finished, releasing its quota if it holds any.
func (e *Engine) Finish(key string, now time.Time) error {
	e.changes++
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	e.touch(w)
	if w.Status == Finished {
		return nil
	}
	if w.Status == Admitted {
		w.finishedIn = w.Admission.ClusterQueue
	}
	e.leave(w, now)
	e.setStatus(w, Finished)
	w.Reason = nil
	// Whatever it was, pending included, a workload that finishes
	// requeues the parked workloads of its LocalQueue's ClusterQueue and
	// cohort (Kueue's WorkloadReconciler.Update, case status finished:
	// QueueAssociatedInadmissibleWorkloadsAfter).
	if lq := e.localQueues[api.NamespacedName(w.Object.Namespace, w.Object.Spec.QueueName)]; lq != nil {
		e.queues.QueueInadmissible(lq.Spec.ClusterQueue, now)
	}
	e.wake(now)
	return nil
}

// SetActive sets a workload's spec.active, as a user does (kueuectl stop
// and resume workload). Deactivating a pending workload takes it out of its
// queue; an admitted one also leaves its quota, as Kueue evicts it with
// reason InactiveWorkload; either way its requeue state is reset.
// Reactivating an inactive workload puts it back in its queue with its
// creation time. Deactivating or reactivating a finished workload requeues
// the parked workloads of its cohort, as any update of it does. Anything
// else only records the field.
func (e *Engine) SetActive(key string, active bool, now time.Time) error {
	e.changes++
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	e.touch(w)
	changed := w.Object.Spec.Active == nil || *w.Object.Spec.Active != active
	w.Object = withActive(w.Object, active)
	switch {
	case !active && (w.Status == Pending || w.Status == Admitted):
		admitted := w.Status == Admitted
		e.leave(w, now)
		e.setStatus(w, Inactive)
		w.Reason, w.RequeueCount, w.RequeueAt = nil, 0, time.Time{}
		// Kueue's workload controller marks any workload it finds
		// inactive evicted, reason InactiveWorkload, whether or not it
		// held quota.
		e.evictions = append(e.evictions, Eviction{Key: key, Reason: EvictedByDeactivation, At: now})
		if admitted {
			w.Evictions++
			w.Info.LastTried = nil
		} else {
			// The workload controller handles the update of an inactive
			// workload as of a finished one (see updated): the parked
			// workloads of its cohort are requeued. An admitted one's
			// release does that.
			e.updated(w, now)
		}
		e.wake(now)
	case changed && w.Status == Finished:
		e.updated(w, now)
		e.wake(now)
	case active && w.Status == Inactive:
		e.dropFinished(key)
		e.setStatus(w, Pending)
		w.RequeueCount, w.RequeueAt = 0, time.Time{}
		w.Info.QueueTime = w.Info.Created
		e.route(w, now)
	}
	return nil
}

// Delete removes a workload, releasing its quota if it holds any.
func (e *Engine) Delete(key string, now time.Time) error {
	e.changes++
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	e.touch(w)
	e.leave(w, now)
	if w.Status == Finished && w.finishedIn != "" {
		// Deleting a workload that still carries an admission in its
		// status (a finished one keeps it) requeues the parked workloads
		// of its LocalQueue's ClusterQueue and cohort again (Kueue's
		// WorkloadReconciler.Delete, QueueAssociatedInadmissibleWorkloadsAfter).
		if lq := e.localQueues[api.NamespacedName(w.Object.Namespace, w.Object.Spec.QueueName)]; lq != nil {
			e.queues.QueueInadmissible(lq.Spec.ClusterQueue, now)
		}
	}
	delete(e.workloads, key)
	delete(e.pending, key)
	delete(e.deactivated, key)
	e.wake(now)
	return nil
}

// leave takes a workload out of its queue or releases its quota.
func (e *Engine) leave(w *Workload, now time.Time) {
	switch w.Status {
	case Finished, Inactive:
		e.dropFinished(w.Info.Key)
	case Pending:
		if w.queuedIn != "" {
			e.queues.Delete(w.queuedIn, w.Info.Key)
			w.queuedIn = ""
		}
	case Admitted:
		e.release(w, now)
	}
}

// release gives back a workload's quota; capacity may now suffice for the
// parked workloads of the cohort.
func (e *Engine) release(w *Workload, now time.Time) {
	cq := w.Admission.ClusterQueue
	st := e.state(cq)
	e.admittedHash -= e.hashAdmitted(w)
	delete(st.admitted, w.Info.Key)
	st.total.Sub(w.Admission.Usage)
	e.chargeLocalQueue(w, w.Admission.Usage, true)
	st.generation++
	if !slices.Contains(e.releasedIn, cq) {
		e.releasedIn = append(e.releasedIn, cq)
	}
	e.snapUsageChanged(cq, st)
	e.snapAdmitted(cq, w.record, false)
	e.cohortGens = nil
	// Kueue's job controller clears the reservation with a Pending
	// condition (jobframework, handle eviction).
	w.condPending = true
	w.Admission = nil
	w.record = nil
	w.PodsReady = false
	e.queues.QueueInadmissible(cq, now)
}

// SetPriority changes a workload's priority; a pending workload is
// re-sorted and, if parked, tried again. It is an update of the workload
// object: when the spec changes, Kueue's workload controller acts on the
// update event (WorkloadReconciler.Update), whatever the workload's state.
// When it does not (the priority the spec already has), the API server
// stores no change and sends no event, so nothing happens.
func (e *Engine) SetPriority(key string, p int32, now time.Time) error {
	e.changes++
	w := e.workloads[key]
	if w == nil {
		return fmt.Errorf("workload %s: %w", key, ErrNotFound)
	}
	e.touch(w)
	old := w.Object.Spec.Priority
	// An unset priority set to 0 changes the spec, not the priority.
	if old != nil && *old == p {
		return nil
	}
	if e.waitingBackoff(w) && !w.backoffUpdated {
		// The first change of its spec since the eviction: until then
		// the spec is the evicted version's.
		w.backoffUpdated, w.evictedUnset = true, old == nil
	}
	w.Object = withPriority(w.Object, p)
	// A changed spec is queued again, as Kueue's PushOrUpdate does with a
	// parked workload whose spec differs, even when its priority stays the
	// same (an unset one set to 0).
	// The queue holds the info by pointer: replace it rather than mutate
	// it under the heap's feet.
	info := *w.Info
	info.Priority = p
	info.LastTried = nil
	switch {
	case w.Status == Pending && w.queuedIn != "":
		e.queues.Delete(w.queuedIn, key)
		w.Info = &info
		e.queues.Push(&queue.Entry{Workload: w.Info}, true, now)
	case w.Status == Admitted:
		w.Info = &info
		// Its protection against preemption changes at once.
		e.snapAdmitted(w.Admission.ClusterQueue, w.record, false)
		w.record = admittedRecord(w)
		e.snapAdmitted(w.Admission.ClusterQueue, w.record, true)
	default:
		w.Info = &info
		// A finished one leaves its queue if it was still in it, and a
		// finished or inactive one requeues the parked workloads of its
		// ClusterQueue's cohort.
		e.updated(w, now)
	}
	return nil
}

// newInfo is the scheduler's view of a workload but its podSets.
func newInfo(wl *api.Workload, key string, created time.Time, nsLabels labels.Set) *scheduler.Workload {
	return &scheduler.Workload{
		Key:             key,
		Namespace:       wl.Namespace,
		UID:             string(wl.UID),
		NamespaceLabels: nsLabels,
		Priority:        api.WorkloadPriority(wl),
		Created:         created,
		QueueTime:       created,
	}
}

// withoutTemplates is a copy of a workload object without its podSets:
// what the scheduler reads of them is in the workload's Info, built
// first, and a pod template is most of the memory an admitted workload
// would hold for as long as it runs (with a Kubernetes PodSpec's fixed
// size, even a one-container template takes kilobytes the collector
// marks on every cycle). The caller's object is left as it is.
func withoutTemplates(wl *api.Workload) *api.Workload {
	c := *wl
	c.Spec.PodSets = nil
	return &c
}

// withActive and withPriority return a copy of a workload object with the
// field set. The engine never writes an object it holds in place: the
// caller that submitted it may hold it too, and so may a copy of the
// engine (Clone), which shares the objects rather than copy them. The
// copy is shallow, as nothing else of the object is ever written.
func withActive(wl *api.Workload, active bool) *api.Workload {
	c := *wl
	c.Spec.Active = &active
	return &c
}

func withPriority(wl *api.Workload, p int32) *api.Workload {
	c := *wl
	c.Spec.Priority = &p
	return &c
}
