package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PriorityClasses is what priority resolution needs to know (KEP-973).
// Each lookup tells apart "there is no such class" (ok false, err nil)
// from "the classes could not be read" (err non-nil): the first is the
// submitter's mistake, the second never is, and a caller must not refuse a
// submission for good because a store was briefly unreachable.
type PriorityClasses interface {
	WorkloadPriorityClass(name string) (value int32, ok bool, err error)
	PriorityClass(name string) (value int32, ok bool, err error)
	// GlobalDefaultPriorityClass returns the globalDefault PriorityClass;
	// with several, the one with the lowest value (as Kueue picks it).
	GlobalDefaultPriorityClass() (name string, value int32, ok bool, err error)
}

// ClassLookupError is a priority class lookup that failed: the class may
// well exist. Resolution returns it, never a field error, so that a front
// door answers it as unavailable (retry) rather than invalid.
type ClassLookupError struct {
	// Kind is KindWorkloadPriorityClass or KindPriorityClass; Name is ""
	// for the globalDefault PriorityClass.
	Kind, Name string
	Err        error
}

// What names what could not be read, for a client.
func (e *ClassLookupError) What() string {
	if e.Name == "" {
		return "the globalDefault " + e.Kind
	}
	return e.Kind + " " + e.Name
}

func (e *ClassLookupError) Error() string {
	return fmt.Sprintf("reading %s: %v", e.What(), e.Err)
}

func (e *ClassLookupError) Unwrap() error { return e.Err }

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
// does not exist is a field error, as the reconciler cannot create the
// workload; a lookup that fails is a *ClassLookupError.
func resolveJobPriority(job *Job, classes PriorityClasses) (resolvedPriority, *field.Error, error) {
	if classes == nil {
		classes = noClasses{}
	}
	if name := job.Labels[PriorityClassLabel]; name != "" {
		v, ok, err := classes.WorkloadPriorityClass(name)
		switch {
		case err != nil:
			return resolvedPriority{}, nil, &ClassLookupError{Kind: KindWorkloadPriorityClass, Name: name, Err: err}
		case !ok:
			return resolvedPriority{}, field.Invalid(field.NewPath("metadata", "labels").Key(PriorityClassLabel), name,
				"WorkloadPriorityClass not found"), nil
		}
		return resolvedPriority{className: name, source: WorkloadPriorityClassSrc, value: v}, nil, nil
	}
	if name := job.Spec.Template.Spec.PriorityClassName; name != "" {
		v, ok, err := classes.PriorityClass(name)
		switch {
		case err != nil:
			return resolvedPriority{}, nil, &ClassLookupError{Kind: KindPriorityClass, Name: name, Err: err}
		case !ok:
			return resolvedPriority{}, field.Invalid(field.NewPath("spec", "template", "spec", "priorityClassName"), name,
				"PriorityClass not found"), nil
		}
		return resolvedPriority{className: name, source: PodPriorityClassSrc, value: v}, nil, nil
	}
	name, v, ok, err := classes.GlobalDefaultPriorityClass()
	if err != nil {
		return resolvedPriority{}, nil, &ClassLookupError{Kind: KindPriorityClass, Err: err}
	}
	if ok {
		return resolvedPriority{className: name, source: PodPriorityClassSrc, value: v}, nil, nil
	}
	return resolvedPriority{}, nil, nil
}

// ClassPriority is the priority a submitted Workload's class gives it:
// spec.priorityClassName looked up as spec.priorityClassSource says (a
// v1beta2 priorityClassRef decodes into both). A Workload that names no
// class gets Kueue's default priority 0 and no source: Kueue resolves no
// class for a bare Workload, not even the globalDefault PriorityClass
// (conformance jetqueue/180), so neither does this. An empty source with a
// name is the WorkloadPriorityClass of that name if there is one, else the
// PriorityClass, as a Job's label is preferred to its pod class; the
// source returned says which was found.
//
// A named class that does not exist is Errors on spec.priorityClassName;
// a lookup that fails is a *ClassLookupError. wl is not changed.
func ClassPriority(wl *Workload, classes PriorityClasses) (source string, value int32, err error) {
	name := wl.Spec.PriorityClassName
	if name == "" {
		return "", 0, nil
	}
	if classes == nil {
		classes = noClasses{}
	}
	src := wl.Spec.PriorityClassSource
	if src == "" || src == WorkloadPriorityClassSrc {
		v, ok, err := classes.WorkloadPriorityClass(name)
		if err != nil {
			return "", 0, &ClassLookupError{Kind: KindWorkloadPriorityClass, Name: name, Err: err}
		}
		if ok {
			return WorkloadPriorityClassSrc, v, nil
		}
	}
	if src == "" || src == PodPriorityClassSrc {
		v, ok, err := classes.PriorityClass(name)
		if err != nil {
			return "", 0, &ClassLookupError{Kind: KindPriorityClass, Name: name, Err: err}
		}
		if ok {
			return PodPriorityClassSrc, v, nil
		}
	}
	missing := KindWorkloadPriorityClass + " or " + KindPriorityClass
	switch src {
	case WorkloadPriorityClassSrc:
		missing = KindWorkloadPriorityClass
	case PodPriorityClassSrc:
		missing = KindPriorityClass
	}
	return "", 0, fromFieldErrors(ObjectRef(wl), field.ErrorList{
		field.Invalid(field.NewPath("spec", "priorityClassName"), name, missing+" not found")})
}

type noClasses struct{}

func (noClasses) WorkloadPriorityClass(string) (int32, bool, error)        { return 0, false, nil }
func (noClasses) PriorityClass(string) (int32, bool, error)                { return 0, false, nil }
func (noClasses) GlobalDefaultPriorityClass() (string, int32, bool, error) { return "", 0, false, nil }
