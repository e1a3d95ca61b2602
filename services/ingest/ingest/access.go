package ingest

import (
	"context"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
)

// Who may call which route. Every route names what it asks of the RBAC
// policy (see routes), as the kube-apiserver names a request:
//
//   - a read of one object is get, a read of many is list; a POST of an
//     object is create; apply is create and update (it is either) of each
//     document's kind, checked for every document before anything is
//     published; DELETE is delete;
//   - the workload actions are POSTs to subresources, so they are create
//     on workloads/finish, workloads/podsready and workloads/priority, as
//     Kubernetes authorizes POST pods/eviction;
//   - explain is get on workloads;
//   - the visibility API is get on clusterqueues/pendingworkloads and
//     localqueues/pendingworkloads in visibility.kueue.x-k8s.io, as Kueue
//     authorizes it: whoever may read a ClusterQueue's pending list sees
//     every namespace's pending workloads in it;
//   - the operator's routes (POST /v1/projection/rebuild, /v1/debug/...)
//     are non-resource URLs with the HTTP method as verb (get, post);
//   - GET /v1/sync only needs an identity: it tells a sequence number.

// Resources as Kubernetes and Kueue name them.
const (
	groupKueue      = "kueue.x-k8s.io"
	groupVisibility = "visibility.kueue.x-k8s.io"
)

// kindResources maps each kind ingest accepts to its API group and
// resource.
var kindResources = map[string][2]string{
	api.KindWorkload:              {groupKueue, "workloads"},
	api.KindLocalQueue:            {groupKueue, "localqueues"},
	api.KindClusterQueue:          {groupKueue, "clusterqueues"},
	api.KindResourceFlavor:        {groupKueue, "resourceflavors"},
	api.KindWorkloadPriorityClass: {groupKueue, "workloadpriorityclasses"},
	api.KindJob:                   {"batch", "jobs"},
	api.KindPriorityClass:         {"scheduling.k8s.io", "priorityclasses"},
	api.KindConfiguration:         {"config.kueue.x-k8s.io", "configurations"},
}

// objectAttributes is verb on o's kind, namespace and name.
func objectAttributes(verb string, o api.Object) rbac.Attributes {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	gr := kindResources[kind]
	a := rbac.Attributes{Verb: verb, APIGroup: gr[0], Resource: gr[1]}
	if m, err := meta.Accessor(o); err == nil {
		a.Namespace, a.Name = m.GetNamespace(), m.GetName()
	}
	return a
}

func workloadAttributes(verb, sub string) func(*http.Request) rbac.Attributes {
	return func(r *http.Request) rbac.Attributes {
		return rbac.Attributes{Verb: verb, APIGroup: groupKueue, Resource: "workloads", Subresource: sub,
			Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	}
}

// batchAttributes is what marking a workload action with JQ-Batch asks:
// create on workloads/batch in the workload's namespace.
func batchAttributes(ns string) rbac.Attributes {
	return rbac.Attributes{Verb: "create", APIGroup: groupKueue, Resource: "workloads", Subresource: "batch", Namespace: ns}
}

// nonResource is the route's path with its method as verb.
func nonResource(r *http.Request) rbac.Attributes {
	return rbac.Attributes{Verb: strings.ToLower(r.Method), Path: r.URL.Path}
}

// Guard holds how ingest identifies and authorizes callers.
type Guard struct {
	// Authn identifies HTTP callers; nil only in tests that put the user
	// on the context themselves.
	Authn *auth.Authenticator
	// Policy decides; nil allows every identified caller everything.
	Policy *rbac.Policy
	// Anonymous lets a request with no identity act as system:anonymous.
	Anonymous bool
}

// NewGuard builds the guard the options describe. Without any way to
// authenticate and without --anonymous it refuses (auth.ErrNoAuthenticator).
func NewGuard(ctx context.Context, o auth.Options) (*Guard, error) {
	a, err := auth.New(ctx, o)
	if err != nil {
		return nil, err
	}
	g := &Guard{Authn: a, Anonymous: o.Anonymous}
	if o.AuthorizationPolicyFile != "" {
		if g.Policy, err = rbac.Load(o.AuthorizationPolicyFile); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// unauthenticated is the 401 of a request without a valid credential.
func unauthenticated() *httpError {
	return fail(http.StatusUnauthorized, "", "", "Unauthorized: a valid credential is required (a bearer token or a client certificate)")
}

// authenticate identifies the caller of every HTTP request before any
// route runs; other front doors (NATS) put the user on the context
// themselves.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.guard == nil || s.guard.Authn == nil {
			next.ServeHTTP(w, r)
			return
		}
		u, err := s.guard.Authn.Authenticate(r)
		if err != nil {
			s.log.Info("request not authenticated", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.String("remote", r.RemoteAddr), zap.Error(err))
			s.writeError(w, r, unauthenticated())
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithUser(r.Context(), u)))
	})
}

// caller is the identity of r: the one its front door put on the
// context, or under --anonymous system:anonymous; else 401.
func (s *Server) caller(r *http.Request) (auth.User, error) {
	if u, ok := auth.UserFrom(r.Context()); ok {
		return u, nil
	}
	if s.guard != nil && s.guard.Anonymous {
		return auth.Anonymous(), nil
	}
	return auth.User{}, unauthenticated()
}

// authorize refuses r (403, worded as Kubernetes words it) unless its
// caller may do every one of attrs.
func (s *Server) authorize(r *http.Request, attrs ...rbac.Attributes) error {
	u, err := s.caller(r)
	if err != nil {
		return err
	}
	if s.guard == nil || s.guard.Policy == nil {
		return nil
	}
	for _, a := range attrs {
		if !s.guard.Policy.Allows(u, a) {
			return fail(http.StatusForbidden, forbiddenObject(a), "", rbac.Forbidden(u, a))
		}
	}
	return nil
}

// visibleNamespaces says where the caller may do a across namespaces:
// everywhere (nil), or only in the namespaces listed. A caller allowed
// nowhere gets 403.
func (s *Server) visibleNamespaces(r *http.Request, a rbac.Attributes) ([]string, error) {
	u, err := s.caller(r)
	if err != nil {
		return nil, err
	}
	if s.guard == nil || s.guard.Policy == nil {
		return nil, nil
	}
	all, nss := s.guard.Policy.Namespaces(u, a)
	if all {
		return nil, nil
	}
	if len(nss) == 0 {
		a.Namespace = ""
		return nil, fail(http.StatusForbidden, "", "", rbac.Forbidden(u, a))
	}
	return nss, nil
}

// forbiddenObject names the object of a refused request, as other errors
// do.
func forbiddenObject(a rbac.Attributes) string {
	if !a.IsResource() || a.Name == "" {
		return ""
	}
	for kind, gr := range kindResources {
		if gr[1] == a.Resource && gr[0] == a.APIGroup {
			if a.Namespace != "" {
				return kind + "/" + a.Namespace + "/" + a.Name
			}
			return kind + "/" + a.Name
		}
	}
	return ""
}
