package scheduler

// Reason tokens: the one catalog of why a workload is not admitted. The
// names follow Kueue's later condition reasons where one exists; each is
// documented for `jqctl explain` and tested against this list.
const (
	// WaitingForQuota: the request fits the queue's limits but the quota
	// is in use now; it may be admitted when usage drops.
	WaitingForQuota = "WaitingForQuota"
	// ExceedsMaxQuota: the request is larger than the queue could ever
	// hold (nominal plus what it may borrow); it waits for a config change.
	ExceedsMaxQuota = "ExceedsMaxQuota"
	// NoMatchingFlavor: no flavor of a resource group tolerates the podSet
	// or matches its node selector, or a requested resource is not covered.
	NoMatchingFlavor = "NoMatchingFlavor"
	// Misconfigured: the workload itself can never be admitted as written
	// (a container requests more than its limit).
	Misconfigured = "Misconfigured"
	// ClusterQueueInactive: the ClusterQueue references a missing flavor
	// or is stopped.
	ClusterQueueInactive = "ClusterQueueInactive"
	// ClusterQueueNotFound: the LocalQueue points to a missing ClusterQueue.
	ClusterQueueNotFound = "ClusterQueueNotFound"
	// LocalQueueNotFound: spec.queueName names no LocalQueue of the namespace.
	LocalQueueNotFound = "LocalQueueNotFound"
	// LocalQueueStopped: the LocalQueue's stopPolicy is Hold or
	// HoldAndDrain; its workloads wait until it is resumed.
	LocalQueueStopped = "LocalQueueStopped"
	// NamespaceMismatch: the ClusterQueue's namespaceSelector excludes the
	// workload's namespace.
	NamespaceMismatch = "NamespaceMismatch"
	// CohortContention: a higher-ordered entry of the same cycle took the
	// cohort capacity this one needed.
	CohortContention = "CohortContention"
	// WaitingForPreemptedWorkloads: victims were chosen; the workload is
	// admitted once they release their quota.
	WaitingForPreemptedWorkloads = "WaitingForPreemptedWorkloads"
	// WaitingForPodsReady: blockAdmission holds every admission until the
	// admitted workloads are PodsReady.
	WaitingForPodsReady = "WaitingForPodsReady"
)

// Tokens lists every reason token, for docs and tests.
var Tokens = []string{
	WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor, Misconfigured,
	ClusterQueueInactive, ClusterQueueNotFound, LocalQueueNotFound,
	LocalQueueStopped, NamespaceMismatch, CohortContention, WaitingForPreemptedWorkloads,
	WaitingForPodsReady,
}

// Reason is why a workload is not admitted, as a value: the events,
// metrics, `jqctl explain` and the Kueue-style message all render it.
type Reason struct {
	Token string `json:"reason"`
	// The first blocking cell, where one is known.
	PodSet   string `json:"podSet,omitempty"`
	Resource string `json:"resource,omitempty"`
	Flavor   string `json:"flavor,omitempty"`
	Cohort   string `json:"cohort,omitempty"`
	// Shortfall is how much more of Resource is needed, in Kueue units.
	Shortfall int64 `json:"shortfall,omitempty"`
	// Message is Kueue v0.6's wording for the same situation.
	Message string `json:"message"`
}
