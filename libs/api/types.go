// Package api holds the Kueue kueue.x-k8s.io/v1beta1-compatible objects
// jetqueue accepts, with strict decoding, Kueue's defaults and Kueue's webhook
// validation. Field names and JSON tags follow Kueue v0.6 so a Kueue user's
// YAML works unchanged; Kubernetes building blocks (ObjectMeta, PodTemplateSpec,
// Quantity, Taint, Toleration, LabelSelector) come from k8s.io/api and
// k8s.io/apimachinery rather than being re-declared.
package api

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups and versions we accept.
const (
	KueueAPIVersion      = "kueue.x-k8s.io/v1beta1"
	ConfigAPIVersion     = "config.kueue.x-k8s.io/v1beta1"
	SchedulingAPIVersion = "scheduling.k8s.io/v1"
	BatchAPIVersion      = "batch/v1"
)

// Kinds we accept.
const (
	KindResourceFlavor        = "ResourceFlavor"
	KindClusterQueue          = "ClusterQueue"
	KindLocalQueue            = "LocalQueue"
	KindWorkloadPriorityClass = "WorkloadPriorityClass"
	KindPriorityClass         = "PriorityClass"
	KindWorkload              = "Workload"
	KindJob                   = "Job"
	KindConfiguration         = "Configuration"
)

// Labels and annotations of Kueue's job integration.
const (
	QueueNameLabel           = "kueue.x-k8s.io/queue-name"
	PriorityClassLabel       = "kueue.x-k8s.io/priority-class"
	JobMinParallelismAnnot   = "kueue.x-k8s.io/job-min-parallelism"
	WorkloadPriorityClassSrc = "kueue.x-k8s.io/workloadpriorityclass"
	PodPriorityClassSrc      = "scheduling.k8s.io/priorityclass"
	DefaultPodSetName        = "main"
	ResourcePods             = corev1.ResourcePods
)

// ResourceFlavor describes a kind of node (kueue.x-k8s.io/v1beta1).
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceFlavorSpec `json:"spec,omitempty"`
}

type ResourceFlavorSpec struct {
	NodeLabels  map[string]string   `json:"nodeLabels,omitempty"`
	NodeTaints  []corev1.Taint      `json:"nodeTaints,omitempty"`
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

type QueueingStrategy string

const (
	StrictFIFO     QueueingStrategy = "StrictFIFO"
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

type StopPolicy string

const (
	StopPolicyNone         StopPolicy = "None"
	StopPolicyHold         StopPolicy = "Hold"
	StopPolicyHoldAndDrain StopPolicy = "HoldAndDrain"
)

type PreemptionPolicy string

const (
	PreemptionNever                     PreemptionPolicy = "Never"
	PreemptionLowerPriority             PreemptionPolicy = "LowerPriority"
	PreemptionLowerOrNewerEqualPriority PreemptionPolicy = "LowerOrNewerEqualPriority"
	PreemptionAny                       PreemptionPolicy = "Any"
)

type BorrowWithinCohortPolicy string

const (
	BorrowWithinCohortNever         BorrowWithinCohortPolicy = "Never"
	BorrowWithinCohortLowerPriority BorrowWithinCohortPolicy = "LowerPriority"
)

type FlavorFungibilityPolicy string

const (
	FungibilityBorrow        FlavorFungibilityPolicy = "Borrow"
	FungibilityPreempt       FlavorFungibilityPolicy = "Preempt"
	FungibilityTryNextFlavor FlavorFungibilityPolicy = "TryNextFlavor"
)

// ClusterQueue is a pool of quota (kueue.x-k8s.io/v1beta1).
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterQueueSpec `json:"spec,omitempty"`
}

type ClusterQueueSpec struct {
	ResourceGroups    []ResourceGroup         `json:"resourceGroups,omitempty"`
	Cohort            string                  `json:"cohort,omitempty"`
	QueueingStrategy  QueueingStrategy        `json:"queueingStrategy,omitempty"`
	NamespaceSelector *metav1.LabelSelector   `json:"namespaceSelector,omitempty"`
	FlavorFungibility *FlavorFungibility      `json:"flavorFungibility,omitempty"`
	Preemption        *ClusterQueuePreemption `json:"preemption,omitempty"`
	AdmissionChecks   []string                `json:"admissionChecks,omitempty"`
	StopPolicy        *StopPolicy             `json:"stopPolicy,omitempty"`
}

type ResourceGroup struct {
	CoveredResources []corev1.ResourceName `json:"coveredResources"`
	Flavors          []FlavorQuotas        `json:"flavors"`
}

type FlavorQuotas struct {
	Name      string          `json:"name"`
	Resources []ResourceQuota `json:"resources"`
}

type ResourceQuota struct {
	Name           corev1.ResourceName `json:"name"`
	NominalQuota   resource.Quantity   `json:"nominalQuota"`
	BorrowingLimit *resource.Quantity  `json:"borrowingLimit,omitempty"`
	LendingLimit   *resource.Quantity  `json:"lendingLimit,omitempty"`
}

type FlavorFungibility struct {
	WhenCanBorrow  FlavorFungibilityPolicy `json:"whenCanBorrow,omitempty"`
	WhenCanPreempt FlavorFungibilityPolicy `json:"whenCanPreempt,omitempty"`
}

type ClusterQueuePreemption struct {
	ReclaimWithinCohort PreemptionPolicy    `json:"reclaimWithinCohort,omitempty"`
	BorrowWithinCohort  *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`
	WithinClusterQueue  PreemptionPolicy    `json:"withinClusterQueue,omitempty"`
}

type BorrowWithinCohort struct {
	Policy               BorrowWithinCohortPolicy `json:"policy,omitempty"`
	MaxPriorityThreshold *int32                   `json:"maxPriorityThreshold,omitempty"`
}

// LocalQueue routes a namespace's workloads to a ClusterQueue.
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalQueueSpec `json:"spec,omitempty"`
}

type LocalQueueSpec struct {
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// StopPolicy is Kueue's LocalQueue stopPolicy (added after v0.6):
	// other than None, the LocalQueue's pending workloads are not
	// admitted; HoldAndDrain also evicts its admitted ones. Absent means
	// None.
	StopPolicy *StopPolicy `json:"stopPolicy,omitempty"`
}

// WorkloadPriorityClass is KEP-973's priority class for workloads only.
type WorkloadPriorityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Value             int32  `json:"value"`
	Description       string `json:"description,omitempty"`
}

// PriorityClass is scheduling.k8s.io/v1 PriorityClass, used as-is.
type PriorityClass = schedulingv1.PriorityClass

// Job is batch/v1 Job, used as-is.
type Job = batchv1.Job

// Workload is the unit of admission (kueue.x-k8s.io/v1beta1).
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorkloadSpec `json:"spec,omitempty"`
}

type WorkloadSpec struct {
	PodSets             []PodSet `json:"podSets"`
	QueueName           string   `json:"queueName,omitempty"`
	PriorityClassName   string   `json:"priorityClassName,omitempty"`
	Priority            *int32   `json:"priority,omitempty"`
	PriorityClassSource string   `json:"priorityClassSource,omitempty"`
	Active              *bool    `json:"active,omitempty"`
}

type PodSet struct {
	Name     string                 `json:"name,omitempty"`
	Template corev1.PodTemplateSpec `json:"template"`
	Count    int32                  `json:"count"`
	MinCount *int32                 `json:"minCount,omitempty"`
}

// Configuration is the subset of Kueue's config.kueue.x-k8s.io/v1beta1
// Configuration that jetqueue implements. Any other field is refused by
// strict decoding, never silently ignored.
type Configuration struct {
	metav1.TypeMeta  `json:",inline"`
	WaitForPodsReady *WaitForPodsReady `json:"waitForPodsReady,omitempty"`
}

type WaitForPodsReady struct {
	Enable            bool               `json:"enable,omitempty"`
	Timeout           *metav1.Duration   `json:"timeout,omitempty"`
	BlockAdmission    *bool              `json:"blockAdmission,omitempty"`
	RequeuingStrategy *RequeuingStrategy `json:"requeuingStrategy,omitempty"`
}

type RequeuingTimestamp string

const (
	RequeueByEviction RequeuingTimestamp = "Eviction"
	RequeueByCreation RequeuingTimestamp = "Creation"
)

type RequeuingStrategy struct {
	Timestamp          *RequeuingTimestamp `json:"timestamp,omitempty"`
	BackoffLimitCount  *int32              `json:"backoffLimitCount,omitempty"`
	BackoffBaseSeconds *int32              `json:"backoffBaseSeconds,omitempty"`
	BackoffMaxSeconds  *int32              `json:"backoffMaxSeconds,omitempty"`
}
