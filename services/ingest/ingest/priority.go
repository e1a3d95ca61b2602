package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
)

// Where a submitted workload's priority comes from.
//
// A Job's priority is derived from its classes (api.JobToWorkload, as
// Kueue's jobframework does); the Job carries no number of its own. A
// Workload does carry spec.priority, and the number is what admission and
// preemption compare, so taking it as submitted would let anyone allowed
// to submit a Workload outrank every other team, which the policy
// withholds by not granting workloads/priority (deploy/auth/roles.yaml).
// So, as Kueue's reconciler derives a Job's workload's priority, ingest
// derives a Workload's: the value of the class spec.priorityClassName
// names (a v1beta2 priorityClassRef decodes into it), or Kueue's default 0
// without a class (api.ClassPriority). A spec.priority that differs from
// the derived value is an explicit priority, which only a caller allowed
// create on workloads/priority in the namespace may set (the right that
// POST .../priority asks); it keeps its value. Anyone else gets 403 on
// spec.priority. A class named but missing is 400 for that caller, and
// taken as Kueue takes it (spec.priority as sent) from one who may set
// priorities; a class that could not be read is 503 (unavailable), never
// 400.

// jobWorkload is the Workload of a submitted Job.
func (s *Server) jobWorkload(ctx context.Context, job *api.Job) (*api.Workload, error) {
	wl, err := api.JobToWorkload(job, s.classes(ctx))
	if err != nil {
		return nil, invalidOrUnavailable(err)
	}
	return wl, nil
}

// classPriority is the submitted Workload with the priority and
// priorityClassSource its class derives (see above). The client's document
// is left as sent, so that explicitPriorities can compare: the copy is
// shallow, as nothing downstream changes more than its name, uid and
// priority.
func (s *Server) classPriority(ctx context.Context, o *api.Workload) (*api.Workload, error) {
	src, value, err := api.ClassPriority(o, s.classes(ctx))
	var le *api.ClassLookupError
	if err != nil && !errors.As(err, &le) && s.maySetPriority(ctx, o.Namespace) {
		// A class that does not exist: Kueue takes such a Workload with
		// the spec.priority it was sent, and so does ingest from a caller
		// who may set priorities anyway (the conformance runs, an
		// administrator). Only a caller who may not is refused.
		return o, nil
	}
	if err != nil {
		return nil, invalidOrUnavailable(err)
	}
	wl := *o
	switch {
	case o.Spec.PriorityClassName != "":
		wl.Spec.PriorityClassSource, wl.Spec.Priority = src, &value
	case api.WorkloadPriority(o) != 0:
		// Without a class the derived value is Kueue's default 0 (nil);
		// an explicit 0 means the same and is kept as sent.
		wl.Spec.Priority = nil
	}
	return &wl, nil
}

// explicitPriorities lets each submitted Workload whose spec.priority
// differs from its derived value keep it, if the caller may create
// workloads/priority in its namespace; else the whole request is refused
// with 403 on spec.priority and nothing is published. objs are the
// documents as sent, subs their prepared submissions.
func (s *Server) explicitPriorities(r *http.Request, objs []api.Object, subs []*submission) error {
	for i, o := range objs {
		sent, ok := o.(*api.Workload)
		wl := subs[i].wl
		if !ok || api.WorkloadPriority(sent) == api.WorkloadPriority(wl) {
			continue
		}
		a := priorityAttributes(wl.Namespace)
		u, err := s.caller(r)
		if err != nil {
			return err
		}
		if s.guard != nil && s.guard.Policy != nil && !s.guard.Policy.Allows(u, a) {
			return fail(http.StatusForbidden, api.ObjectRef(sent), "spec.priority",
				fmt.Sprintf("%s: spec.priority %d is not %d, %s", rbac.Forbidden(u, a),
					api.WorkloadPriority(sent), api.WorkloadPriority(wl), derivedFrom(wl)))
		}
		wl.Spec.Priority = sent.Spec.Priority
	}
	return nil
}

// priorityAttributes is what setting a workload's priority in ns asks.
func priorityAttributes(ns string) rbac.Attributes {
	return rbac.Attributes{Verb: "create", APIGroup: groupKueue, Resource: "workloads", Subresource: "priority", Namespace: ns}
}

// maySetPriority says whether the caller on ctx may set priorities in
// ns: without a policy everyone identified may, as every route allows.
func (s *Server) maySetPriority(ctx context.Context, ns string) bool {
	if s.guard == nil || s.guard.Policy == nil {
		return true
	}
	u, ok := auth.UserFrom(ctx)
	if !ok {
		if !s.guard.Anonymous {
			return false
		}
		u = auth.Anonymous()
	}
	return s.guard.Policy.Allows(u, priorityAttributes(ns))
}

// derivedFrom says where a derived priority came from.
func derivedFrom(wl *api.Workload) string {
	switch wl.Spec.PriorityClassSource {
	case api.WorkloadPriorityClassSrc:
		return "the value of WorkloadPriorityClass " + wl.Spec.PriorityClassName
	case api.PodPriorityClassSrc:
		return "the value of PriorityClass " + wl.Spec.PriorityClassName
	}
	return "the priority of a Workload without a priority class"
}
