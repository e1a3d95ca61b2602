package api

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Configuration defaults (config.kueue.x-k8s.io/v1beta1; backoff seconds from v0.7+).
const (
	DefaultPodsReadyTimeout   = 5 * time.Minute
	DefaultBackoffBaseSeconds = 60
	DefaultBackoffMaxSeconds  = 3600
)

// Default applies Kueue's defaults in place: the CRD defaults the API server
// would fill plus the mutating webhooks' (ClusterQueue, Workload) and the
// Configuration defaulter. It is idempotent and never fails; an unknown
// object or a nil pointer is left alone. Deliberately not defaulted:
// ClusterQueue namespaceSelector (nil matches no namespace, as in Kueue),
// Workload priority (nil reads as 0 through WorkloadPriority) and anything of
// Job, PriorityClass, ResourceFlavor, LocalQueue and WorkloadPriorityClass.
func Default(obj Object) {
	if isNilObject(obj) {
		return
	}
	switch o := obj.(type) {
	case *ClusterQueue:
		o.TypeMeta = typeMeta(KueueAPIVersion, KindClusterQueue, o.TypeMeta)
		defaultClusterQueue(&o.Spec)
	case *Workload:
		o.TypeMeta = typeMeta(KueueAPIVersion, KindWorkload, o.TypeMeta)
		defaultWorkload(&o.Spec)
	case *Configuration:
		o.TypeMeta = typeMeta(ConfigAPIVersion, KindConfiguration, o.TypeMeta)
		defaultConfiguration(o)
	case *ResourceFlavor:
		o.TypeMeta = typeMeta(KueueAPIVersion, KindResourceFlavor, o.TypeMeta)
	case *LocalQueue:
		o.TypeMeta = typeMeta(KueueAPIVersion, KindLocalQueue, o.TypeMeta)
	case *WorkloadPriorityClass:
		o.TypeMeta = typeMeta(KueueAPIVersion, KindWorkloadPriorityClass, o.TypeMeta)
	case *PriorityClass:
		o.TypeMeta = typeMeta(SchedulingAPIVersion, KindPriorityClass, o.TypeMeta)
	case *Job:
		o.TypeMeta = typeMeta(BatchAPIVersion, KindJob, o.TypeMeta)
	}
}

// typeMeta fills an empty TypeMeta so objects built in code serialise like
// decoded ones; a decoded object already carries exactly these values.
func typeMeta(apiVersion, kind string, tm metav1.TypeMeta) metav1.TypeMeta {
	if tm.APIVersion == "" {
		tm.APIVersion = apiVersion
	}
	if tm.Kind == "" {
		tm.Kind = kind
	}
	return tm
}

func defaultClusterQueue(s *ClusterQueueSpec) {
	if s.QueueingStrategy == "" {
		s.QueueingStrategy = BestEffortFIFO
	}
	// The webhook creates the structs; the CRD schema defaults fill single
	// empty fields of a user-supplied struct. We do both.
	if s.Preemption == nil {
		s.Preemption = &ClusterQueuePreemption{}
	}
	if s.Preemption.WithinClusterQueue == "" {
		s.Preemption.WithinClusterQueue = PreemptionNever
	}
	if s.Preemption.ReclaimWithinCohort == "" {
		s.Preemption.ReclaimWithinCohort = PreemptionNever
	}
	if s.Preemption.BorrowWithinCohort == nil {
		s.Preemption.BorrowWithinCohort = &BorrowWithinCohort{}
	}
	if s.Preemption.BorrowWithinCohort.Policy == "" {
		s.Preemption.BorrowWithinCohort.Policy = BorrowWithinCohortNever
	}
	if s.FlavorFungibility == nil {
		s.FlavorFungibility = &FlavorFungibility{}
	}
	if s.FlavorFungibility.WhenCanBorrow == "" {
		s.FlavorFungibility.WhenCanBorrow = FungibilityBorrow
	}
	if s.FlavorFungibility.WhenCanPreempt == "" {
		s.FlavorFungibility.WhenCanPreempt = FungibilityTryNextFlavor
	}
	// An explicit stopPolicy: "" is treated like an absent one rather than
	// refused, matching how the non-pointer string fields behave.
	if s.StopPolicy == nil || *s.StopPolicy == "" {
		p := StopPolicyNone
		s.StopPolicy = &p
	}
}

func defaultWorkload(s *WorkloadSpec) {
	if len(s.PodSets) == 1 && s.PodSets[0].Name == "" {
		s.PodSets[0].Name = DefaultPodSetName
	}
	if s.Active == nil {
		active := true
		s.Active = &active
	}
}

func defaultConfiguration(c *Configuration) {
	w := c.WaitForPodsReady
	if w == nil {
		return
	}
	if w.Timeout == nil {
		w.Timeout = &metav1.Duration{Duration: DefaultPodsReadyTimeout}
	}
	if w.BlockAdmission == nil {
		block := w.Enable
		w.BlockAdmission = &block
	}
	if w.RequeuingStrategy == nil {
		w.RequeuingStrategy = &RequeuingStrategy{}
	}
	// Fill field by field: Kueue v0.6.2 replaced the whole struct here and
	// lost backoffLimitCount (#2224, fixed in v0.6.3).
	r := w.RequeuingStrategy
	if r.Timestamp == nil {
		ts := RequeueByEviction
		r.Timestamp = &ts
	}
	if r.BackoffBaseSeconds == nil {
		v := int32(DefaultBackoffBaseSeconds)
		r.BackoffBaseSeconds = &v
	}
	if r.BackoffMaxSeconds == nil {
		v := int32(DefaultBackoffMaxSeconds)
		r.BackoffMaxSeconds = &v
	}
}
