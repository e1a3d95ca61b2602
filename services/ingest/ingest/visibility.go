package ingest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/store"
)

// Kueue's visibility API (visibility.kueue.x-k8s.io): the pending
// workloads of a ClusterQueue, or of one LocalQueue, in the order the
// admission engine's queue holds them, with their positions. Served at
// every version Kueue has served it: v1alpha1 (Kueue v0.6), v1beta1 and
// v1beta2; the answer is the same at each, under that version's
// apiVersion. As a Kubernetes API, it answers errors as metav1.Status.
const visibilityGroup = "visibility.kueue.x-k8s.io"

var visibilityVersions = []string{"v1alpha1", "v1beta1", "v1beta2"}

// Kueue's query rules: limit 0 or absent means 1000; offset counts from
// 0. jetqueue caps limit at maxVisibilityLimit, and both must be integers
// that are not negative.
const (
	defaultVisibilityLimit = 1000
	maxVisibilityLimit     = 10000
	maxVisibilityOffset    = 1<<31 - 1
)

func (s *Server) visibilityRoutes(handle func(string, func(*http.Request) error, func(*http.Request) (int, any, error)),
	may func(func(*http.Request) rbac.Attributes) func(*http.Request) error, identified func(*http.Request) error) {
	// Any other path under /apis/, or another method, is answered as an
	// API server would: a Status, not the mux's plain text.
	handle("/apis/", identified, func(r *http.Request) (int, any, error) {
		if r.Method != http.MethodGet {
			return 0, nil, apierrors.NewMethodNotSupported(schema.GroupResource{Group: visibilityGroup, Resource: "pendingworkloads"}, strings.ToLower(r.Method))
		}
		return 0, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("the server could not find %s: it serves only %s's pendingworkloads, at %s",
				r.URL.Path, visibilityGroup, strings.Join(visibilityVersions, ", "))}}
	})
	for _, v := range visibilityVersions {
		base := "/apis/" + visibilityGroup + "/" + v
		handle("GET "+base+"/clusterqueues/{cq}/pendingworkloads", may(func(r *http.Request) rbac.Attributes {
			return rbac.Attributes{Verb: "get", APIGroup: groupVisibility, Resource: "clusterqueues", Subresource: "pendingworkloads", Name: r.PathValue("cq")}
		}), s.readAfter(s.pendingWorkloads(v)))
		handle("GET "+base+"/namespaces/{ns}/localqueues/{lq}/pendingworkloads", may(func(r *http.Request) rbac.Attributes {
			return rbac.Attributes{Verb: "get", APIGroup: groupVisibility, Resource: "localqueues", Subresource: "pendingworkloads",
				Namespace: r.PathValue("ns"), Name: r.PathValue("lq")}
		}), s.readAfter(s.pendingWorkloads(v)))
	}
}

// visibilityQuery reads limit and offset.
func visibilityQuery(r *http.Request) (limit, offset int, err error) {
	q := r.URL.Query()
	limit = defaultVisibilityLimit
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 || n > maxVisibilityLimit {
			return 0, 0, apierrors.NewBadRequest(fmt.Sprintf("limit: must be an integer from 0 (the default, %d) to %d, not %q",
				defaultVisibilityLimit, maxVisibilityLimit, v))
		}
		if n > 0 {
			limit = int(n)
		}
	}
	if v := q.Get("offset"); v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 || n > maxVisibilityOffset {
			return 0, 0, apierrors.NewBadRequest(fmt.Sprintf("offset: must be an integer from 0 to %d, not %q", maxVisibilityOffset, v))
		}
		offset = int(n)
	}
	return limit, offset, nil
}

type pendingMeta struct {
	Name              string      `json:"name"`
	Namespace         string      `json:"namespace"`
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
}

type pendingItem struct {
	Metadata pendingMeta `json:"metadata"`
	store.PendingWorkload
}

// pendingWorkloads answers Kueue's PendingWorkloadsSummary at one version.
func (s *Server) pendingWorkloads(version string) func(*http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		limit, offset, err := visibilityQuery(r)
		if err != nil {
			return 0, nil, err
		}
		ctx := r.Context()
		cq, ns, lq := r.PathValue("cq"), r.PathValue("ns"), r.PathValue("lq")
		if lq != "" {
			target, err := s.store.LocalQueueTarget(ctx, ns, lq)
			if errors.Is(err, store.ErrNotFound) {
				return 0, nil, apierrors.NewNotFound(schema.GroupResource{Group: visibilityGroup, Resource: "localqueue"}, lq)
			}
			if err != nil {
				return 0, nil, err
			}
			cq = target
		} else {
			ok, err := s.store.ClusterQueueExists(ctx, cq)
			if err != nil {
				return 0, nil, err
			}
			if !ok {
				return 0, nil, apierrors.NewNotFound(schema.GroupResource{Group: visibilityGroup, Resource: "clusterqueue"}, cq)
			}
		}
		items, err := s.store.PendingWorkloads(ctx, cq, ns, lq, limit, offset)
		if err != nil {
			return 0, nil, err
		}
		out := make([]pendingItem, 0, len(items))
		for _, p := range items {
			out = append(out, pendingItem{Metadata: pendingMeta{Name: p.Name, Namespace: p.Namespace,
				CreationTimestamp: metav1.NewTime(p.CreatedAt)}, PendingWorkload: p})
		}
		return http.StatusOK, map[string]any{"kind": "PendingWorkloadsSummary",
			"apiVersion": visibilityGroup + "/" + version, "metadata": map[string]any{}, "items": out}, nil
	}
}

// kubernetesPath reports whether a request is to a Kubernetes-style API,
// whose errors are metav1.Status.
func kubernetesPath(r *http.Request) bool {
	return r != nil && strings.HasPrefix(r.URL.Path, "/apis/")
}

// asStatus renders an error answer as the metav1.Status a Kubernetes API
// server gives: an error that already is one (apierrors) as it is, any
// other by its HTTP status.
func asStatus(err error, he *httpError, requestID string) metav1.Status {
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		st := as.Status()
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		return st
	}
	msgs := make([]string, 0, len(he.errs))
	for _, e := range he.errs {
		var parts []string
		for _, p := range []string{e.Object, e.Field, e.Message} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		msgs = append(msgs, strings.Join(parts, ": "))
	}
	msg := strings.Join(msgs, "; ")
	if requestID != "" {
		msg += " (request id " + requestID + ")"
	}
	reason := metav1.StatusReasonUnknown
	switch he.status {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		reason = metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		reason = metav1.StatusReasonForbidden
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusMethodNotAllowed:
		reason = metav1.StatusReasonMethodNotAllowed
	case http.StatusConflict:
		reason = metav1.StatusReasonConflict
	case http.StatusRequestEntityTooLarge:
		reason = metav1.StatusReasonRequestEntityTooLarge
	case http.StatusTooManyRequests:
		reason = metav1.StatusReasonTooManyRequests
	case http.StatusInternalServerError:
		reason = metav1.StatusReasonInternalError
	case http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		reason = metav1.StatusReasonTimeout
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(he.status)}
	// Each error naming a field is a cause, as the API server lists an
	// invalid object's fields, so clients read the field, not the text.
	for _, e := range he.errs {
		if e.Field != "" {
			if st.Details == nil {
				st.Details = &metav1.StatusDetails{}
			}
			st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: e.Field, Message: e.Message})
		}
	}
	return st
}

// fromAPIStatus turns a Kubernetes API error into the service's error
// shape, for the routes that are not Kubernetes-style.
func fromAPIStatus(err error) (*httpError, bool) {
	var as apierrors.APIStatus
	if !errors.As(err, &as) {
		return nil, false
	}
	st := as.Status()
	return &httpError{status: int(st.Code), errs: []api.FieldError{{Message: st.Message}}}, true
}
