// Package status renders jetqueue's state as Kueue v0.6.3 fills the status
// of its objects, so that a Kueue user reads back what Kueue would show:
//
//	event log ──Workload.Apply (one event at a time, in the projector)──▶ WorkloadStatus (conditions, admission, requeueState)
//	projection (usage, counts) ──ClusterQueueStatus / LocalQueueStatus (at read time)──▶ status as Kueue's controllers write it
//
// It is pure: the caller passes each event's time, nothing reads a clock.
// The condition types, reasons and messages are Kueue v0.6.3's
// (pkg/workload, pkg/scheduler, pkg/controller/core, pkg/cache).
package status

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Kueue's Workload condition types.
const (
	QuotaReserved = "QuotaReserved"
	Admitted      = "Admitted"
	Evicted       = "Evicted"
	PodsReady     = "PodsReady"
	Finished      = "Finished"
)

// Eviction reasons (kueue v1beta1 WorkloadEvictedBy*) and Kueue v0.6.3's
// message for each.
var evictionMessages = map[string]string{
	"Preempted":           "Preempted to accommodate a higher priority Workload",
	"ClusterQueueStopped": "The ClusterQueue is stopped",
	"LocalQueueStopped":   "The LocalQueue is stopped",
	"InactiveWorkload":    "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
	"AdmissionCheck":      "At least one admission check is false",
}

// RequeueState is Kueue's status.requeueState.
type RequeueState struct {
	Count     *int32       `json:"count,omitempty"`
	RequeueAt *metav1.Time `json:"requeueAt,omitempty"`
}

// Workload is the part of a Workload's status that follows from its
// events: conditions and requeueState. status.admission is rendered from
// the projection's admission (Admission).
type Workload struct {
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
	RequeueState *RequeueState      `json:"requeueState,omitempty"`
}

// Apply folds one event about the workload into its status, as Kueue's
// scheduler, workload controller and job reconciler would have written
// it at the event's time. waitForPodsReady is whether the Configuration
// in force enables waitForPodsReady: only then does Kueue v0.6.3's job
// reconciler write the PodsReady condition (jobframework reconciler.go,
// step 5, "handle WaitForPodsReady").
func (w *Workload) Apply(ev events.Event, waitForPodsReady bool) {
	now := metav1.NewTime(ev.Time.UTC().Truncate(time.Second))
	set := func(typ string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&w.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	// unreserve is Kueue's UnsetQuotaReservationWithCondition: QuotaReserved
	// false, and Admitted false if it was true (SyncAdmittedCondition).
	unreserve := func(reason, msg string) {
		set(QuotaReserved, metav1.ConditionFalse, reason, msg)
		if meta.IsStatusConditionTrue(w.Conditions, Admitted) {
			set(Admitted, metav1.ConditionFalse, "NoReservation", "The workload has no reservation")
		}
	}
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		*w = Workload{}
	case *events.InadmissibleData:
		reason := "Pending"
		if d.Reason.Token == scheduler.LocalQueueStopped {
			// Written by the workload controller, not the scheduler
			// (reconcileOnLocalQueueActiveState, with Kueue's fallback
			// reason).
			reason = "Inadmissible"
		}
		unreserve(reason, d.Reason.Message)
	case *events.QuotaReservedData:
		set(QuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue "+d.Admission.ClusterQueue)
		if c := meta.FindStatusCondition(w.Conditions, Evicted); c != nil && c.Status != metav1.ConditionFalse {
			c.Status, c.LastTransitionTime = metav1.ConditionFalse, now
		}
		// No admission checks: a reservation is an admission.
		set(Admitted, metav1.ConditionTrue, "Admitted", "The workload is admitted")
		if waitForPodsReady {
			set(PodsReady, metav1.ConditionFalse, "PodsReady", "Not all pods are ready or succeeded")
		}
	case *events.EvictedData:
		if d.Reason == "InactiveWorkload" && !meta.IsStatusConditionTrue(w.Conditions, QuotaReserved) {
			// An inactive workload Kueue's scheduler admitted (its
			// LocalQueue, created after it, listed it), evicted at once
			// by the workload controller: the log holds no admission
			// for it. Its status ends as Kueue leaves it.
			set(Evicted, metav1.ConditionTrue, d.Reason, "The workload is deactivated")
			// The admission set it false a moment before.
			meta.FindStatusCondition(w.Conditions, Evicted).LastTransitionTime = now
			set(QuotaReserved, metav1.ConditionFalse, "Pending", "The workload is deactivated")
			set(Admitted, metav1.ConditionFalse, "NoReservation", "The workload has no reservation")
			w.RequeueState = nil
			break
		}
		msg := evictionMessages[d.Reason]
		switch {
		case d.Reason == "PodsReadyTimeout":
			msg = fmt.Sprintf("Exceeded the PodsReady timeout %s/%s", d.Namespace, d.Name)
		case msg == "":
			msg = "Evicted: " + d.Reason
		}
		set(Evicted, metav1.ConditionTrue, d.Reason, msg)
		unreserve("Pending", msg)
		if meta.FindStatusCondition(w.Conditions, PodsReady) != nil {
			set(PodsReady, metav1.ConditionFalse, "PodsReady", "Not all pods are ready or succeeded")
		}
		if d.Reason == "PodsReadyTimeout" && d.RequeueCount > 0 {
			count := d.RequeueCount
			w.RequeueState = &RequeueState{Count: &count}
			if d.RequeueAt != nil {
				t := metav1.NewTime(d.RequeueAt.UTC())
				w.RequeueState.RequeueAt = &t
			}
		}
		if d.Reason == "InactiveWorkload" {
			w.RequeueState = nil
		}
	case *events.ActiveChangedData:
		// Kueue's workload controller: a deactivated workload is evicted
		// and leaves its quota if it holds any; a reactivated one loses
		// its requeue state too.
		if !d.Active {
			w.Deactivated(ev.Time)
			if meta.IsStatusConditionTrue(w.Conditions, QuotaReserved) {
				unreserve("Pending", "The workload is deactivated")
				if meta.FindStatusCondition(w.Conditions, PodsReady) != nil {
					set(PodsReady, metav1.ConditionFalse, "PodsReady", "Not all pods are ready or succeeded")
				}
			}
		}
		w.RequeueState = nil
	case *events.WorkloadFinishedData:
		msg := "Job finished successfully"
		if !d.Succeeded {
			msg = "Job failed"
		}
		set(Finished, metav1.ConditionTrue, "JobFinished", msg)
	}
	switch ev.Type {
	case events.PodsReady:
		if waitForPodsReady && meta.IsStatusConditionTrue(w.Conditions, Admitted) {
			set(PodsReady, metav1.ConditionTrue, "PodsReady", "All pods were ready or succeeded since the workload admission")
		}
	case events.Deactivated:
		w.Deactivated(ev.Time)
	}
}

// Deactivated is Kueue's workload controller finding the workload
// inactive (WorkloadReconciler.Reconcile): unless it is evicted already,
// it is evicted with reason InactiveWorkload, whether or not it held
// quota, and it loses its requeue state. The projector calls it for a
// workload submitted with spec.active false.
func (w *Workload) Deactivated(at time.Time) {
	if !meta.IsStatusConditionTrue(w.Conditions, Evicted) {
		meta.SetStatusCondition(&w.Conditions, metav1.Condition{Type: Evicted, Status: metav1.ConditionTrue,
			Reason: "InactiveWorkload", Message: "The workload is deactivated", LastTransitionTime: metav1.NewTime(at.UTC().Truncate(time.Second))})
	}
	w.RequeueState = nil
}

// PodSetAssignment is one entry of Kueue's status.admission.podSetAssignments.
type PodSetAssignment struct {
	Name          string                         `json:"name"`
	Flavors       map[corev1.ResourceName]string `json:"flavors,omitempty"`
	ResourceUsage corev1.ResourceList            `json:"resourceUsage,omitempty"`
	Count         *int32                         `json:"count,omitempty"`
}

// Admission is Kueue's status.admission.
type Admission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// AdmissionOf renders an admission with Kueue's quantities (cpu in
// milli-units, memory in binary units).
func AdmissionOf(a *scheduler.Admission) *Admission {
	if a == nil {
		return nil
	}
	out := &Admission{ClusterQueue: a.ClusterQueue, PodSetAssignments: []PodSetAssignment{}}
	for _, ps := range a.PodSets {
		count := ps.Count
		p := PodSetAssignment{Name: ps.Name, Count: &count, Flavors: map[corev1.ResourceName]string{}, ResourceUsage: corev1.ResourceList{}}
		for r, f := range ps.Flavors {
			p.Flavors[r] = f
		}
		for r, v := range ps.Usage {
			p.ResourceUsage[r] = Quantity(r, v)
		}
		out.PodSetAssignments = append(out.PodSetAssignments, p)
	}
	return out
}
