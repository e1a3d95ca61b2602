package status

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// Quantity renders an amount in Kueue's units (milli-cpu, whole units
// otherwise) as Kueue's workload.ResourceQuantity does: cpu in decimal
// milli-units, memory, ephemeral storage and hugepages in binary units.
func Quantity(name corev1.ResourceName, v int64) resource.Quantity {
	switch {
	case name == corev1.ResourceCPU:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return *resource.NewQuantity(v, resource.BinarySI)
	default:
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
}

// ResourceUsage is one resource of a flavor in a ClusterQueue's status.
type ResourceUsage struct {
	Name     corev1.ResourceName `json:"name"`
	Total    resource.Quantity   `json:"total"`
	Borrowed resource.Quantity   `json:"borrowed"`
}

// FlavorUsage is one flavor of a ClusterQueue's status.
type FlavorUsage struct {
	Name      string          `json:"name"`
	Resources []ResourceUsage `json:"resources"`
}

// ClusterQueueStatus is Kueue v0.6.3's ClusterQueue status.
type ClusterQueueStatus struct {
	FlavorsReservation []FlavorUsage      `json:"flavorsReservation"`
	FlavorsUsage       []FlavorUsage      `json:"flavorsUsage"`
	PendingWorkloads   int32              `json:"pendingWorkloads"`
	ReservingWorkloads int32              `json:"reservingWorkloads"`
	AdmittedWorkloads  int32              `json:"admittedWorkloads"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterQueueFacts is what the projection knows of a ClusterQueue.
type ClusterQueueFacts struct {
	Spec api.ClusterQueueSpec
	// Usage is what its admitted workloads hold, in Kueue's units.
	Usage map[quota.FlavorResource]int64
	// Pending and Admitted count its workloads.
	Pending, Admitted int32
	// Flavors says which ResourceFlavors exist.
	Flavors map[string]bool
	// Since is when the queue was last applied.
	Since time.Time
}

// ClusterQueue renders a ClusterQueue's status as Kueue fills it: every
// flavor and resource of its spec in spec order, with the quota its
// workloads reserve (which, without admission checks, is also what they
// use) and what of it is borrowed (above nominal); the counts; and the
// Active condition with Kueue's cache reasons.
func ClusterQueue(f ClusterQueueFacts) ClusterQueueStatus {
	var usage []FlavorUsage
	for _, rg := range f.Spec.ResourceGroups {
		for _, fl := range rg.Flavors {
			fu := FlavorUsage{Name: fl.Name, Resources: []ResourceUsage{}}
			for _, r := range fl.Resources {
				used := f.Usage[quota.FlavorResource{Flavor: fl.Name, Resource: r.Name}]
				borrowed := max(0, used-quota.Value(r.Name, r.NominalQuota))
				fu.Resources = append(fu.Resources, ResourceUsage{Name: r.Name, Total: Quantity(r.Name, used), Borrowed: Quantity(r.Name, borrowed)})
			}
			usage = append(usage, fu)
		}
	}
	if usage == nil {
		usage = []FlavorUsage{}
	}
	st := ClusterQueueStatus{FlavorsReservation: usage, FlavorsUsage: usage,
		PendingWorkloads: f.Pending, ReservingWorkloads: f.Admitted, AdmittedWorkloads: f.Admitted}
	var reasons []string
	if p := f.Spec.StopPolicy; p != nil && *p != api.StopPolicyNone {
		reasons = append(reasons, "Stopped")
	}
	for _, rg := range f.Spec.ResourceGroups {
		missing := false
		for _, fl := range rg.Flavors {
			missing = missing || !f.Flavors[fl.Name]
		}
		if missing {
			reasons = append(reasons, "FlavorNotFound")
			break
		}
	}
	since := metav1.NewTime(f.Since.UTC().Truncate(time.Second))
	cond := metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "Can admit new workloads", LastTransitionTime: since}
	if len(reasons) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reasons[0], "Can't admit new workloads: "+strings.Join(reasons, ", ")
	}
	st.Conditions = []metav1.Condition{cond}
	return st
}

// Active says whether a ClusterQueue with this status admits workloads.
func (s ClusterQueueStatus) Active() bool {
	return len(s.Conditions) > 0 && s.Conditions[0].Status == metav1.ConditionTrue
}

// LocalQueueResourceUsage is one resource of a flavor in a LocalQueue's
// status.
type LocalQueueResourceUsage struct {
	Name  corev1.ResourceName `json:"name"`
	Total resource.Quantity   `json:"total"`
}

// LocalQueueFlavorUsage is one flavor of a LocalQueue's status.
type LocalQueueFlavorUsage struct {
	Name      string                    `json:"name"`
	Resources []LocalQueueResourceUsage `json:"resources"`
}

// LocalQueueStatus is Kueue v0.6.3's LocalQueue status.
type LocalQueueStatus struct {
	PendingWorkloads   int32                   `json:"pendingWorkloads"`
	ReservingWorkloads int32                   `json:"reservingWorkloads"`
	AdmittedWorkloads  int32                   `json:"admittedWorkloads"`
	Conditions         []metav1.Condition      `json:"conditions,omitempty"`
	FlavorsReservation []LocalQueueFlavorUsage `json:"flavorsReservation"`
	FlavorUsage        []LocalQueueFlavorUsage `json:"flavorUsage"`
}

// LocalQueueFacts is what the projection knows of a LocalQueue.
type LocalQueueFacts struct {
	// ClusterQueue is its target's status and spec; nil when it does
	// not exist.
	ClusterQueue      *ClusterQueueFacts
	Usage             map[quota.FlavorResource]int64
	Pending, Admitted int32
	Since             time.Time
	// Stopped is whether its stopPolicy is other than None.
	Stopped bool
}

// LocalQueue renders a LocalQueue's status as Kueue's LocalQueue
// controller fills it: its workloads' counts, the quota they reserve per
// flavor of its ClusterQueue, and Active (False with reason Stopped while
// its stopPolicy is not None).
func LocalQueue(f LocalQueueFacts) LocalQueueStatus {
	st := LocalQueueStatus{PendingWorkloads: f.Pending, ReservingWorkloads: f.Admitted, AdmittedWorkloads: f.Admitted,
		FlavorsReservation: []LocalQueueFlavorUsage{}}
	since := metav1.NewTime(f.Since.UTC().Truncate(time.Second))
	cond := metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "Can submit new workloads to clusterQueue", LastTransitionTime: since}
	switch {
	case f.Stopped:
		// Checked first, as Kueue's LocalQueue reconciler does (after
		// v0.6, which had no LocalQueue stopPolicy).
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Stopped", "LocalQueue is stopped"
	case f.ClusterQueue == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
	case !ClusterQueue(*f.ClusterQueue).Active():
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
	}
	st.Conditions = []metav1.Condition{cond}
	if f.ClusterQueue != nil {
		for _, rg := range f.ClusterQueue.Spec.ResourceGroups {
			for _, fl := range rg.Flavors {
				fu := LocalQueueFlavorUsage{Name: fl.Name, Resources: []LocalQueueResourceUsage{}}
				for _, r := range fl.Resources {
					used := f.Usage[quota.FlavorResource{Flavor: fl.Name, Resource: r.Name}]
					fu.Resources = append(fu.Resources, LocalQueueResourceUsage{Name: r.Name, Total: Quantity(r.Name, used)})
				}
				st.FlavorsReservation = append(st.FlavorsReservation, fu)
			}
		}
	}
	st.FlavorUsage = st.FlavorsReservation
	return st
}
