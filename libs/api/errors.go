package api

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FieldError is one problem with one object. Object is "Kind/name" for
// cluster-scoped kinds and "Kind/namespace/name" for namespaced ones (see
// ObjectRef); Field is a path relative to the object such as
// "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit". Decode errors
// about a document whose kind or name is unknown use "document N" as Object.
// Message follows Kubernetes' wording ("Invalid value: ...: detail",
// "Required value", "Unsupported value: ...") so it reads like kubectl's
// answer to the same manifest under Kueue.
type FieldError struct {
	Object  string `json:"object"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Object + ": " + e.Message
	}
	return e.Object + ": " + e.Field + ": " + e.Message
}

// Is lets errors.Is(err, ErrUnsupportedKind) see through Errors. The
// classification is derived from the three public fields only, so it survives
// a JSON round trip of the error body (a client can classify it too).
func (e FieldError) Is(target error) bool {
	return target == ErrUnsupportedKind && e.Field == "kind" &&
		strings.Contains(e.Message, ErrUnsupportedKind.Error())
}

// Errors is a non-empty list of FieldErrors; functions in this package never
// return an empty Errors as a non-nil error.
type Errors []FieldError

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap exposes each FieldError to errors.Is / errors.As.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, fe := range e {
		out[i] = fe
	}
	return out
}

// ErrUnsupportedKind is matched (errors.Is) by a Decode or Validate error when
// an object's kind is outside jetqueue's scope (AdmissionCheck, Pod, MPIJob,
// ...). The error is still a FieldError on field "kind", so a caller may
// choose to skip such documents rather than refuse the whole request.
var ErrUnsupportedKind = errors.New("unsupported kind")

// orNil keeps the "nil error means valid" contract: a nil Errors slice must
// not travel inside a non-nil error interface.
func (e Errors) orNil() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

func fromFieldErrors(object string, list field.ErrorList) Errors {
	var out Errors
	for _, fe := range list {
		if fe == nil {
			continue
		}
		out = append(out, FieldError{Object: object, Field: fe.Field, Message: fe.ErrorBody()})
	}
	return out
}

// NamespacedName is the "namespace/name" key used across jetqueue.
func NamespacedName(namespace, name string) string {
	return namespace + "/" + name
}

// ObjectRef names an object the way FieldError.Object does: "Kind/name" or
// "Kind/namespace/name". An object created with only metadata.generateName
// is named by its generateName (e.g. "Job/default/sample-job-"), which is the
// most a user can recognise before a name is assigned. Configuration has no
// metadata and is just "Configuration".
func ObjectRef(obj Object) string {
	kind := kindOf(obj)
	if _, ok := obj.(*Configuration); ok {
		return kind
	}
	m, err := meta.Accessor(obj)
	if err != nil || isNilObject(obj) {
		return kind
	}
	name := m.GetName()
	if name == "" {
		name = m.GetGenerateName()
	}
	if isNamespaced(obj) || m.GetNamespace() != "" {
		return kind + "/" + m.GetNamespace() + "/" + name
	}
	return kind + "/" + name
}

// kindOf relies on the Go type rather than TypeMeta so objects built in code
// (with empty TypeMeta) are named correctly.
func kindOf(obj Object) string {
	switch obj.(type) {
	case *ResourceFlavor:
		return KindResourceFlavor
	case *ClusterQueue:
		return KindClusterQueue
	case *LocalQueue:
		return KindLocalQueue
	case *WorkloadPriorityClass:
		return KindWorkloadPriorityClass
	case *PriorityClass:
		return KindPriorityClass
	case *Workload:
		return KindWorkload
	case *Job:
		return KindJob
	case *Configuration:
		return KindConfiguration
	case nil:
		return "<nil>"
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

func isNamespaced(obj Object) bool {
	switch obj.(type) {
	case *LocalQueue, *Workload, *Job:
		return true
	}
	return false
}

// isNilObject catches typed nil pointers hidden in the interface, which
// would otherwise panic on the first field access.
func isNilObject(obj Object) bool {
	switch o := obj.(type) {
	case nil:
		return true
	case *ResourceFlavor:
		return o == nil
	case *ClusterQueue:
		return o == nil
	case *LocalQueue:
		return o == nil
	case *WorkloadPriorityClass:
		return o == nil
	case *PriorityClass:
		return o == nil
	case *Workload:
		return o == nil
	case *Job:
		return o == nil
	case *Configuration:
		return o == nil
	}
	return false
}

// Object is one decoded, defaulted object: one of *ResourceFlavor,
// *ClusterQueue, *LocalQueue, *WorkloadPriorityClass, *PriorityClass,
// *Workload, *Job, *Configuration. It is runtime.Object so that the
// Kubernetes types (PriorityClass, Job) fit without wrappers and every object
// can be deep-copied; use a type switch to get at the concrete type.
type Object = runtime.Object
