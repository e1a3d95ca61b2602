package api

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefaultClusterQueue(t *testing.T) {
	never, tryNext := PreemptionNever, FungibilityTryNextFlavor
	for _, tc := range []struct {
		name string
		in   ClusterQueueSpec
		want ClusterQueueSpec
	}{
		{"empty spec gets every default but namespaceSelector",
			ClusterQueueSpec{},
			ClusterQueueSpec{
				QueueingStrategy:  BestEffortFIFO,
				Preemption:        &ClusterQueuePreemption{WithinClusterQueue: never, ReclaimWithinCohort: never, BorrowWithinCohort: &BorrowWithinCohort{Policy: BorrowWithinCohortNever}},
				FlavorFungibility: &FlavorFungibility{WhenCanBorrow: FungibilityBorrow, WhenCanPreempt: tryNext},
				StopPolicy:        ptr(StopPolicyNone),
			}},
		{"single empty fields are filled, set ones kept",
			ClusterQueueSpec{
				QueueingStrategy:  StrictFIFO,
				Preemption:        &ClusterQueuePreemption{WithinClusterQueue: PreemptionLowerPriority, BorrowWithinCohort: &BorrowWithinCohort{MaxPriorityThreshold: ptr[int32](5)}},
				FlavorFungibility: &FlavorFungibility{WhenCanPreempt: FungibilityPreempt},
				StopPolicy:        ptr(StopPolicyHold),
				NamespaceSelector: &metav1.LabelSelector{},
			},
			ClusterQueueSpec{
				QueueingStrategy:  StrictFIFO,
				Preemption:        &ClusterQueuePreemption{WithinClusterQueue: PreemptionLowerPriority, ReclaimWithinCohort: never, BorrowWithinCohort: &BorrowWithinCohort{Policy: BorrowWithinCohortNever, MaxPriorityThreshold: ptr[int32](5)}},
				FlavorFungibility: &FlavorFungibility{WhenCanBorrow: FungibilityBorrow, WhenCanPreempt: FungibilityPreempt},
				StopPolicy:        ptr(StopPolicyHold),
				NamespaceSelector: &metav1.LabelSelector{},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cq := &ClusterQueue{Spec: tc.in}
			Default(cq)
			if diff := cmp.Diff(tc.want, cq.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if cq.APIVersion != KueueAPIVersion || cq.Kind != KindClusterQueue {
				t.Errorf("TypeMeta %+v", cq.TypeMeta)
			}
		})
	}
}

func TestDefaultWorkload(t *testing.T) {
	wl := &Workload{Spec: WorkloadSpec{PodSets: []PodSet{{Count: 1}}}}
	Default(wl)
	if wl.Spec.PodSets[0].Name != DefaultPodSetName || wl.Spec.Active == nil || !*wl.Spec.Active {
		t.Errorf("single podSet workload: %+v", wl.Spec)
	}
	if wl.Spec.Priority != nil || WorkloadPriority(wl) != 0 {
		t.Error("priority must stay nil and read as 0")
	}
	two := &Workload{Spec: WorkloadSpec{PodSets: []PodSet{{Count: 1}, {Count: 1}}, Active: ptr(false)}}
	Default(two)
	if two.Spec.PodSets[0].Name != "" || two.Spec.PodSets[1].Name != "" || *two.Spec.Active {
		t.Errorf("two podSets are not named and active=false is kept: %+v", two.Spec)
	}
	if WorkloadPriority(&Workload{Spec: WorkloadSpec{Priority: ptr[int32](-7)}}) != -7 || WorkloadPriority(nil) != 0 {
		t.Error("WorkloadPriority")
	}
}

func TestDefaultConfiguration(t *testing.T) {
	eviction, creation := RequeueByEviction, RequeueByCreation
	for _, tc := range []struct {
		name string
		in   *WaitForPodsReady
		want *WaitForPodsReady
	}{
		{"absent block stays absent", nil, nil},
		{"enable implies blockAdmission",
			&WaitForPodsReady{Enable: true},
			&WaitForPodsReady{Enable: true, Timeout: &metav1.Duration{Duration: 5 * time.Minute}, BlockAdmission: ptr(true),
				RequeuingStrategy: &RequeuingStrategy{Timestamp: &eviction, BackoffBaseSeconds: ptr[int32](60), BackoffMaxSeconds: ptr[int32](3600)}}},
		{"disabled means no blockAdmission",
			&WaitForPodsReady{},
			&WaitForPodsReady{Timeout: &metav1.Duration{Duration: 5 * time.Minute}, BlockAdmission: ptr(false),
				RequeuingStrategy: &RequeuingStrategy{Timestamp: &eviction, BackoffBaseSeconds: ptr[int32](60), BackoffMaxSeconds: ptr[int32](3600)}}},
		{"backoffLimitCount survives a missing timestamp (v0.6.3 fix #2224)",
			&WaitForPodsReady{Enable: true, Timeout: &metav1.Duration{Duration: time.Minute}, BlockAdmission: ptr(false),
				RequeuingStrategy: &RequeuingStrategy{BackoffLimitCount: ptr[int32](3)}},
			&WaitForPodsReady{Enable: true, Timeout: &metav1.Duration{Duration: time.Minute}, BlockAdmission: ptr(false),
				RequeuingStrategy: &RequeuingStrategy{Timestamp: &eviction, BackoffLimitCount: ptr[int32](3), BackoffBaseSeconds: ptr[int32](60), BackoffMaxSeconds: ptr[int32](3600)}}},
		{"set values are kept",
			&WaitForPodsReady{Enable: true, RequeuingStrategy: &RequeuingStrategy{Timestamp: &creation, BackoffBaseSeconds: ptr[int32](10), BackoffMaxSeconds: ptr[int32](20)}},
			&WaitForPodsReady{Enable: true, Timeout: &metav1.Duration{Duration: 5 * time.Minute}, BlockAdmission: ptr(true),
				RequeuingStrategy: &RequeuingStrategy{Timestamp: &creation, BackoffBaseSeconds: ptr[int32](10), BackoffMaxSeconds: ptr[int32](20)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Configuration{WaitForPodsReady: tc.in}
			Default(c)
			if diff := cmp.Diff(tc.want, c.WaitForPodsReady); diff != "" {
				t.Errorf("waitForPodsReady (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultIsIdempotentAndNilSafe(t *testing.T) {
	for _, obj := range []Object{baseCQ(), baseWL(), baseConfig(), baseRF(), baseLQ(), baseWPC(), basePC(), baseJob()} {
		again := obj.DeepCopyObject()
		Default(again)
		if !equalJSON(t, obj, again) {
			t.Errorf("Default(%s) is not idempotent", ObjectRef(obj))
		}
	}
	Default(nil)
	Default((*ClusterQueue)(nil))
	Default((*Workload)(nil))
}

func TestDefaultLeavesJobAlone(t *testing.T) {
	j := &Job{}
	Default(j)
	if j.Spec.Parallelism != nil || j.Spec.Completions != nil || j.Spec.Suspend != nil {
		t.Errorf("job spec changed: %+v", j.Spec)
	}
}
