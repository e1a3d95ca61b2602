package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int, typ events.Type, data any) events.Event {
	return events.Event{Type: typ, Time: t0.Add(time.Duration(sec) * time.Second), Data: data}
}

func cond(typ, st, reason, msg string, sec int) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st), Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second))}
}

// TestWorkloadConditionsFollowKueue: a workload's life, event by event,
// gives the conditions Kueue v0.6.3 writes, with their transition times.
func TestWorkloadConditionsFollowKueue(t *testing.T) {
	ref := events.WorkloadRef{Namespace: "ns", Name: "w"}
	requeueAt := t0.Add(time.Minute)
	steps := []struct {
		ev   events.Event
		want []metav1.Condition
		rq   *RequeueState
	}{
		{at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), nil, nil},
		{at(1, events.Inadmissible, &events.InadmissibleData{WorkloadRef: ref, Reason: scheduler.Reason{Token: "WaitingForQuota", Message: "no room"}}),
			[]metav1.Condition{cond("QuotaReserved", "False", "Pending", "no room", 1)}, nil},
		{at(2, events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}),
			[]metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 2),
				cond("Admitted", "True", "Admitted", "The workload is admitted", 2),
				cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 2)}, nil},
		{at(3, events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "PodsReadyTimeout", RequeueCount: 1, RequeueAt: &requeueAt}),
			[]metav1.Condition{cond("QuotaReserved", "False", "Pending", "Exceeded the PodsReady timeout ns/w", 3),
				cond("Admitted", "False", "NoReservation", "The workload has no reservation", 3),
				cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 2),
				cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w", 3)},
			&RequeueState{Count: new(int32(1)), RequeueAt: &metav1.Time{Time: requeueAt}}},
		{at(4, events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}),
			[]metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 4),
				cond("Admitted", "True", "Admitted", "The workload is admitted", 4),
				cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 2),
				cond("Evicted", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w", 4)},
			&RequeueState{Count: new(int32(1)), RequeueAt: &metav1.Time{Time: requeueAt}}},
		{at(5, events.PodsReady, &ref),
			[]metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 4),
				cond("Admitted", "True", "Admitted", "The workload is admitted", 4),
				cond("PodsReady", "True", "PodsReady", "All pods were ready or succeeded since the workload admission", 5),
				cond("Evicted", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w", 4)},
			&RequeueState{Count: new(int32(1)), RequeueAt: &metav1.Time{Time: requeueAt}}},
		{at(6, events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "Preempted"}),
			[]metav1.Condition{cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a higher priority Workload", 6),
				cond("Admitted", "False", "NoReservation", "The workload has no reservation", 6),
				cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 6),
				cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload", 6)},
			&RequeueState{Count: new(int32(1)), RequeueAt: &metav1.Time{Time: requeueAt}}},
		{at(7, events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: false}),
			[]metav1.Condition{cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a higher priority Workload", 6),
				cond("Admitted", "False", "NoReservation", "The workload has no reservation", 6),
				cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 6),
				cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload", 6),
				cond("Finished", "True", "JobFinished", "Job failed", 7)},
			&RequeueState{Count: new(int32(1)), RequeueAt: &metav1.Time{Time: requeueAt}}},
	}
	steps = append(steps, struct {
		ev   events.Event
		want []metav1.Condition
		rq   *RequeueState
	}{at(8, events.ActiveChanged, &events.ActiveChangedData{WorkloadRef: ref, Active: false}),
		[]metav1.Condition{cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a higher priority Workload", 6),
			cond("Admitted", "False", "NoReservation", "The workload has no reservation", 6),
			cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 6),
			cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload", 6),
			cond("Finished", "True", "JobFinished", "Job failed", 7)}, nil})
	var w Workload
	for i, s := range steps {
		w.Apply(s.ev, true)
		if diff := cmp.Diff(s.want, w.Conditions); diff != "" {
			t.Errorf("after step %d (%s), conditions (-want,+got):\n%s", i, s.ev.Type, diff)
		}
		if diff := cmp.Diff(s.rq, w.RequeueState); diff != "" {
			t.Errorf("after step %d (%s), requeueState (-want,+got):\n%s", i, s.ev.Type, diff)
		}
	}
}

// TestPodsReadyConditionOnlyWithWaitForPodsReady: without
// waitForPodsReady, Kueue v0.6.3 writes no PodsReady condition: an
// admission gives QuotaReserved and Admitted only, a pods-ready report
// and an eviction add none. (The job reconciler's step 5 runs only when
// waitForPodsReady is enabled; jobframework/reconciler.go.)
func TestPodsReadyConditionOnlyWithWaitForPodsReady(t *testing.T) {
	ref := events.WorkloadRef{Namespace: "ns", Name: "w"}
	var w Workload
	w.Apply(at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), false)
	w.Apply(at(1, events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}), false)
	admitted := []metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 1),
		cond("Admitted", "True", "Admitted", "The workload is admitted", 1)}
	if diff := cmp.Diff(admitted, w.Conditions); diff != "" {
		t.Errorf("admitted, conditions (-want,+got):\n%s", diff)
	}
	w.Apply(at(2, events.PodsReady, &ref), false)
	if diff := cmp.Diff(admitted, w.Conditions); diff != "" {
		t.Errorf("pods ready, conditions (-want,+got):\n%s", diff)
	}
	w.Apply(at(3, events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "Preempted"}), false)
	want := []metav1.Condition{cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a higher priority Workload", 3),
		cond("Admitted", "False", "NoReservation", "The workload has no reservation", 3),
		cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload", 3)}
	if diff := cmp.Diff(want, w.Conditions); diff != "" {
		t.Errorf("evicted, conditions (-want,+got):\n%s", diff)
	}
}

// TestDeactivationEvictsAsKueue: spec.active false on an admitted
// workload is Kueue's InactiveWorkload eviction.
func TestDeactivationEvictsAsKueue(t *testing.T) {
	ref := events.WorkloadRef{Namespace: "ns", Name: "w"}
	var w Workload
	w.Apply(at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), true)
	w.Apply(at(1, events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}), true)
	w.Apply(at(2, events.ActiveChanged, &events.ActiveChangedData{WorkloadRef: ref, Active: false}), true)
	want := []metav1.Condition{cond("QuotaReserved", "False", "Pending", "The workload is deactivated", 2),
		cond("Admitted", "False", "NoReservation", "The workload has no reservation", 2),
		cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 1),
		cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated", 2)}
	if diff := cmp.Diff(want, w.Conditions); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
}

// TestInactiveWithoutQuotaIsEvicted: Kueue's workload controller marks
// any workload it finds inactive evicted (InactiveWorkload), one that
// never held quota too: one deactivated while pending, and one submitted
// inactive (the projector calls Deactivated for it). One evicted already
// keeps its reason.
func TestInactiveWithoutQuotaIsEvicted(t *testing.T) {
	ref := events.WorkloadRef{Namespace: "ns", Name: "w"}
	inactive := []metav1.Condition{cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated", 2)}
	var pending Workload
	pending.Apply(at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), true)
	pending.Apply(at(2, events.ActiveChanged, &events.ActiveChangedData{WorkloadRef: ref, Active: false}), true)
	if diff := cmp.Diff(inactive, pending.Conditions); diff != "" {
		t.Errorf("deactivated while pending, conditions (-want,+got):\n%s", diff)
	}
	var submitted Workload
	submitted.Apply(at(2, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), true)
	submitted.Deactivated(t0.Add(2 * time.Second))
	if diff := cmp.Diff(inactive, submitted.Conditions); diff != "" {
		t.Errorf("submitted inactive, conditions (-want,+got):\n%s", diff)
	}
	// Listed by a LocalQueue created after it, admitted by the scheduler
	// and evicted again: the log holds only admission's eviction.
	var listed Workload
	listed.Apply(at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), true)
	listed.Deactivated(t0)
	listed.Apply(at(2, events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "InactiveWorkload"}), true)
	if diff := cmp.Diff([]metav1.Condition{cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated", 2),
		cond("QuotaReserved", "False", "Pending", "The workload is deactivated", 2),
		cond("Admitted", "False", "NoReservation", "The workload has no reservation", 2)}, listed.Conditions); diff != "" {
		t.Errorf("inactive, admitted and evicted again, conditions (-want,+got):\n%s", diff)
	}
	// Evicted by the PodsReady timeout and waiting out its backoff, then
	// deactivated: Kueue leaves the Evicted condition as it is and drops
	// the requeue state.
	requeueAt := t0.Add(time.Minute)
	var backoff Workload
	backoff.Apply(at(0, events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref}), true)
	backoff.Apply(at(1, events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}), true)
	backoff.Apply(at(2, events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "PodsReadyTimeout", RequeueCount: 1, RequeueAt: &requeueAt}), true)
	backoff.Apply(at(3, events.ActiveChanged, &events.ActiveChangedData{WorkloadRef: ref, Active: false}), true)
	if c := meta.FindStatusCondition(backoff.Conditions, Evicted); c == nil || c.Reason != "PodsReadyTimeout" || c.Status != metav1.ConditionTrue {
		t.Errorf("evicted by timeout, then deactivated: Evicted %+v, want True PodsReadyTimeout", c)
	}
	if backoff.RequeueState != nil {
		t.Errorf("evicted by timeout, then deactivated: requeueState %+v, want none", backoff.RequeueState)
	}
}

// TestClusterQueueStatus: reservations in spec order with Kueue's units
// and what is borrowed; the Active condition names why a queue is not.
func TestClusterQueueStatus(t *testing.T) {
	hold := api.StopPolicyHold
	spec := api.ClusterQueueSpec{ResourceGroups: []api.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{"cpu", "memory"},
		Flavors: []api.FlavorQuotas{
			{Name: "b", Resources: []api.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("4")}, {Name: "memory", NominalQuota: resource.MustParse("32Gi")}}},
			{Name: "a", Resources: []api.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("1")}, {Name: "memory", NominalQuota: resource.MustParse("1Gi")}}},
		}}}}
	usage := map[quota.FlavorResource]int64{{Flavor: "b", Resource: "cpu"}: 5500, {Flavor: "b", Resource: "memory"}: 36 << 30}
	got := ClusterQueue(ClusterQueueFacts{Spec: spec, Usage: usage, Pending: 3, Admitted: 2, Flavors: map[string]bool{"a": true, "b": true}, Since: t0})
	type row struct{ Flavor, Resource, Total, Borrowed string }
	var rows []row
	for _, f := range got.FlavorsReservation {
		for _, r := range f.Resources {
			rows = append(rows, row{f.Name, string(r.Name), r.Total.String(), r.Borrowed.String()})
		}
	}
	want := []row{{"b", "cpu", "5500m", "1500m"}, {"b", "memory", "36Gi", "4Gi"}, {"a", "cpu", "0", "0"}, {"a", "memory", "0", "0"}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("flavorsReservation (-want,+got):\n%s", diff)
	}
	if got.PendingWorkloads != 3 || got.ReservingWorkloads != 2 || got.AdmittedWorkloads != 2 {
		t.Errorf("counts: %+v", got)
	}
	if diff := cmp.Diff([]metav1.Condition{cond("Active", "True", "Ready", "Can admit new workloads", 0)}, got.Conditions); diff != "" {
		t.Errorf("active queue (-want,+got):\n%s", diff)
	}
	spec.StopPolicy = &hold
	stopped := ClusterQueue(ClusterQueueFacts{Spec: spec, Flavors: map[string]bool{"b": true}, Since: t0})
	if diff := cmp.Diff([]metav1.Condition{cond("Active", "False", "Stopped", "Can't admit new workloads: Stopped, FlavorNotFound", 0)}, stopped.Conditions); diff != "" {
		t.Errorf("stopped queue with a missing flavor (-want,+got):\n%s", diff)
	}
	lq := LocalQueue(LocalQueueFacts{ClusterQueue: &ClusterQueueFacts{Spec: spec, Flavors: map[string]bool{"a": true, "b": true}}, Since: t0})
	if diff := cmp.Diff([]metav1.Condition{cond("Active", "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue", 0)}, lq.Conditions); diff != "" {
		t.Errorf("LocalQueue of a stopped queue (-want,+got):\n%s", diff)
	}
	spec.StopPolicy = nil
	lq = LocalQueue(LocalQueueFacts{ClusterQueue: &ClusterQueueFacts{Spec: spec, Flavors: map[string]bool{"a": true, "b": true}}, Since: t0, Stopped: true})
	if diff := cmp.Diff([]metav1.Condition{cond("Active", "False", "Stopped", "LocalQueue is stopped", 0)}, lq.Conditions); diff != "" {
		t.Errorf("stopped LocalQueue (-want,+got):\n%s", diff)
	}
	if lq := LocalQueue(LocalQueueFacts{Since: t0}); lq.Conditions[0].Reason != "ClusterQueueDoesNotExist" || len(lq.FlavorsReservation) != 0 {
		t.Errorf("LocalQueue without its ClusterQueue: %+v", lq)
	}
}
