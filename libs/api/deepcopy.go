package api

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies: they make our types runtime.Objects (see Object)
// and let callers keep a stored object safe from a caller's later mutation.

func (in *ResourceFlavor) DeepCopy() *ResourceFlavor {
	if in == nil {
		return nil
	}
	out := &ResourceFlavor{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.NodeLabels = maps.Clone(in.Spec.NodeLabels)
	if in.Spec.NodeTaints != nil {
		out.Spec.NodeTaints = make([]corev1.Taint, len(in.Spec.NodeTaints))
		for i := range in.Spec.NodeTaints {
			in.Spec.NodeTaints[i].DeepCopyInto(&out.Spec.NodeTaints[i])
		}
	}
	if in.Spec.Tolerations != nil {
		out.Spec.Tolerations = make([]corev1.Toleration, len(in.Spec.Tolerations))
		for i := range in.Spec.Tolerations {
			in.Spec.Tolerations[i].DeepCopyInto(&out.Spec.Tolerations[i])
		}
	}
	return out
}

func (in *ResourceFlavor) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *ClusterQueue) DeepCopy() *ClusterQueue {
	if in == nil {
		return nil
	}
	out := &ClusterQueue{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s, o := &in.Spec, &out.Spec
	o.Cohort = s.Cohort
	o.QueueingStrategy = s.QueueingStrategy
	if s.ResourceGroups != nil {
		o.ResourceGroups = make([]ResourceGroup, len(s.ResourceGroups))
		for i, rg := range s.ResourceGroups {
			o.ResourceGroups[i] = deepCopyResourceGroup(rg)
		}
	}
	o.NamespaceSelector = s.NamespaceSelector.DeepCopy()
	if s.FlavorFungibility != nil {
		ff := *s.FlavorFungibility
		o.FlavorFungibility = &ff
	}
	if s.Preemption != nil {
		p := *s.Preemption
		if p.BorrowWithinCohort != nil {
			b := *p.BorrowWithinCohort
			b.MaxPriorityThreshold = copyPtr(b.MaxPriorityThreshold)
			p.BorrowWithinCohort = &b
		}
		o.Preemption = &p
	}
	if s.AdmissionChecks != nil {
		o.AdmissionChecks = append([]string{}, s.AdmissionChecks...)
	}
	o.StopPolicy = copyPtr(s.StopPolicy)
	return out
}

func deepCopyResourceGroup(rg ResourceGroup) ResourceGroup {
	var out ResourceGroup
	if rg.CoveredResources != nil {
		out.CoveredResources = append([]corev1.ResourceName{}, rg.CoveredResources...)
	}
	if rg.Flavors != nil {
		out.Flavors = make([]FlavorQuotas, len(rg.Flavors))
		for i, f := range rg.Flavors {
			out.Flavors[i].Name = f.Name
			if f.Resources == nil {
				continue
			}
			out.Flavors[i].Resources = make([]ResourceQuota, len(f.Resources))
			for j, r := range f.Resources {
				out.Flavors[i].Resources[j] = ResourceQuota{
					Name:           r.Name,
					NominalQuota:   r.NominalQuota.DeepCopy(),
					BorrowingLimit: copyQuantity(r.BorrowingLimit),
					LendingLimit:   copyQuantity(r.LendingLimit),
				}
			}
		}
	}
	return out
}

func (in *ClusterQueue) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *LocalQueue) DeepCopy() *LocalQueue {
	if in == nil {
		return nil
	}
	out := &LocalQueue{TypeMeta: in.TypeMeta, Spec: in.Spec}
	out.Spec.StopPolicy = copyPtr(in.Spec.StopPolicy)
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

func (in *LocalQueue) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *WorkloadPriorityClass) DeepCopy() *WorkloadPriorityClass {
	if in == nil {
		return nil
	}
	out := &WorkloadPriorityClass{TypeMeta: in.TypeMeta, Value: in.Value, Description: in.Description}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

func (in *WorkloadPriorityClass) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *Workload) DeepCopy() *Workload {
	if in == nil {
		return nil
	}
	out := &Workload{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s, o := &in.Spec, &out.Spec
	o.QueueName = s.QueueName
	o.PriorityClassName = s.PriorityClassName
	o.PriorityClassSource = s.PriorityClassSource
	o.Priority = copyPtr(s.Priority)
	o.Active = copyPtr(s.Active)
	if s.PodSets != nil {
		o.PodSets = make([]PodSet, len(s.PodSets))
		for i := range s.PodSets {
			ps := &s.PodSets[i]
			o.PodSets[i] = PodSet{Name: ps.Name, Count: ps.Count, MinCount: copyPtr(ps.MinCount)}
			ps.Template.DeepCopyInto(&o.PodSets[i].Template)
		}
	}
	return out
}

func (in *Workload) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *Configuration) DeepCopy() *Configuration {
	if in == nil {
		return nil
	}
	out := &Configuration{TypeMeta: in.TypeMeta}
	if w := in.WaitForPodsReady; w != nil {
		c := &WaitForPodsReady{Enable: w.Enable, BlockAdmission: copyPtr(w.BlockAdmission)}
		if w.Timeout != nil {
			c.Timeout = &metav1.Duration{Duration: w.Timeout.Duration}
		}
		if r := w.RequeuingStrategy; r != nil {
			c.RequeuingStrategy = &RequeuingStrategy{
				Timestamp:          copyPtr(r.Timestamp),
				BackoffLimitCount:  copyPtr(r.BackoffLimitCount),
				BackoffBaseSeconds: copyPtr(r.BackoffBaseSeconds),
				BackoffMaxSeconds:  copyPtr(r.BackoffMaxSeconds),
			}
		}
		out.WaitForPodsReady = c
	}
	return out
}

func (in *Configuration) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}
