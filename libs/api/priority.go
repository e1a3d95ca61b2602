package api

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PriorityClasses is what priority resolution needs to know (KEP-973).
type PriorityClasses interface {
	WorkloadPriorityClass(name string) (value int32, ok bool)
	PriorityClass(name string) (value int32, ok bool)
	// GlobalDefaultPriorityClass returns the globalDefault PriorityClass;
	// with several, the one with the lowest value (as Kueue picks it).
	GlobalDefaultPriorityClass() (name string, value int32, ok bool)
}

// WorkloadPriority returns spec.priority, or 0 (Kueue's default priority)
// when it is nil.
func WorkloadPriority(wl *Workload) int32 {
	if wl == nil || wl.Spec.Priority == nil {
		return 0
	}
	return *wl.Spec.Priority
}

type resolvedPriority struct {
	className, source string
	value             int32
}

// resolveJobPriority follows jobframework's extractPriority: the Job's
// kueue.x-k8s.io/priority-class label wins and the pod class is then not
// consulted; else the pod template's priorityClassName; else the
// globalDefault PriorityClass; else 0 without a class. A named class that
// does not exist is an error, as the reconciler cannot create the workload.
func resolveJobPriority(job *Job, classes PriorityClasses) (resolvedPriority, *field.Error) {
	if classes == nil {
		classes = noClasses{}
	}
	if name := job.Labels[PriorityClassLabel]; name != "" {
		v, ok := classes.WorkloadPriorityClass(name)
		if !ok {
			return resolvedPriority{}, field.Invalid(field.NewPath("metadata", "labels").Key(PriorityClassLabel), name,
				"WorkloadPriorityClass not found")
		}
		return resolvedPriority{className: name, source: WorkloadPriorityClassSrc, value: v}, nil
	}
	if name := job.Spec.Template.Spec.PriorityClassName; name != "" {
		v, ok := classes.PriorityClass(name)
		if !ok {
			return resolvedPriority{}, field.Invalid(field.NewPath("spec", "template", "spec", "priorityClassName"), name,
				"PriorityClass not found")
		}
		return resolvedPriority{className: name, source: PodPriorityClassSrc, value: v}, nil
	}
	if name, v, ok := classes.GlobalDefaultPriorityClass(); ok {
		return resolvedPriority{className: name, source: PodPriorityClassSrc, value: v}, nil
	}
	return resolvedPriority{}, nil
}

type noClasses struct{}

func (noClasses) WorkloadPriorityClass(string) (int32, bool)        { return 0, false }
func (noClasses) PriorityClass(string) (int32, bool)                { return 0, false }
func (noClasses) GlobalDefaultPriorityClass() (string, int32, bool) { return "", 0, false }
