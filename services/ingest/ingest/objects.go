package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/status"
	"github.com/jetqueue/jetqueue/libs/store"
)

// The Kueue object API: every kind jetqueue holds, read back as Kueue's
// objects (status as Kueue fills it) at Kubernetes' paths, so that
// `kubectl get --raw` and jqctl read the same thing:
//
//	GET /apis/{group}/{version}/{resource}                       list (namespaced kinds: every namespace the caller may list)
//	GET /apis/{group}/{version}/{resource}/{name}                one cluster-scoped object
//	GET /apis/{group}/{version}/namespaces/{ns}/{resource}       list of one namespace
//	GET /apis/{group}/{version}/namespaces/{ns}/{resource}/{name} one namespaced object
//
// Lists take labelSelector and fieldSelector (apimachinery's syntax),
// workloads also limit (1 to 1000, default 500) and continue; watch=true
// streams changes (watch.go). A read is get, a list list, a watch watch
// on the kind's resource, as the kube-apiserver names them.

// resourceDef is one readable kind.
type resourceDef struct {
	Group, Version, Resource, Kind string
	Namespaced                     bool
	// Fields are the field selector labels the kind supports besides
	// metadata.name and metadata.namespace, with their aliases.
	Fields map[string]string
}

func (d resourceDef) apiVersion() string {
	if d.Group == "" {
		return d.Version
	}
	return d.Group + "/" + d.Version
}

// readable lists the kinds of the object API.
var readable = []resourceDef{
	{Group: groupKueue, Version: "v1beta1", Resource: "resourceflavors", Kind: api.KindResourceFlavor},
	{Group: groupKueue, Version: "v1beta1", Resource: "clusterqueues", Kind: api.KindClusterQueue,
		Fields: map[string]string{"spec.cohort": "spec.cohort", "cohort": "spec.cohort"}},
	{Group: groupKueue, Version: "v1beta1", Resource: "localqueues", Kind: api.KindLocalQueue, Namespaced: true,
		Fields: map[string]string{"spec.clusterQueue": "spec.clusterQueue", "clusterQueue": "spec.clusterQueue"}},
	{Group: groupKueue, Version: "v1beta1", Resource: "workloadpriorityclasses", Kind: api.KindWorkloadPriorityClass},
	{Group: groupKueue, Version: "v1beta1", Resource: "workloads", Kind: api.KindWorkload, Namespaced: true,
		Fields: map[string]string{"status": "status", "spec.queueName": "spec.queueName", "queue": "spec.queueName",
			"status.admission.clusterQueue": "clusterQueue", "clusterQueue": "clusterQueue"}},
	{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Kind: api.KindPriorityClass},
	{Group: "config.kueue.x-k8s.io", Version: "v1beta1", Resource: "configurations", Kind: api.KindConfiguration},
}

// objectRoutes are the object API's patterns, each with its kind.
func objectRoutes() map[string]resourceDef {
	out := map[string]resourceDef{}
	for _, d := range readable {
		base := "/apis/" + d.apiVersion()
		out["GET "+base+"/"+d.Resource] = d
		if d.Namespaced {
			out["GET "+base+"/namespaces/{ns}/"+d.Resource] = d
			out["GET "+base+"/namespaces/{ns}/"+d.Resource+"/{name}"] = d
		} else {
			out["GET "+base+"/"+d.Resource+"/{name}"] = d
		}
	}
	return out
}

// objectQuery is a parsed object API request.
type objectQuery struct {
	def             resourceDef
	namespace, name string
	labels          labels.Selector
	fields          fields.Selector
	limit           int
	continue_       string
	// namespaces limits a list across namespaces to those the caller
	// may see (nil: all).
	namespaces []string
}

const (
	defaultObjectLimit = 500
	maxSelectorBytes   = 4096
)

// parseObjectQuery reads and bounds a request's path and parameters.
func parseObjectQuery(r *http.Request, d resourceDef) (objectQuery, error) {
	q := objectQuery{def: d, namespace: r.PathValue("ns"), name: r.PathValue("name"), labels: labels.Everything(),
		fields: fields.Everything(), limit: defaultObjectLimit}
	v := r.URL.Query()
	if s := v.Get("labelSelector"); s != "" {
		if len(s) > maxSelectorBytes {
			return q, fail(http.StatusBadRequest, "", "labelSelector", fmt.Sprintf("longer than %d bytes", maxSelectorBytes))
		}
		sel, err := labels.Parse(s)
		if err != nil {
			return q, fail(http.StatusBadRequest, "", "labelSelector", err.Error())
		}
		q.labels = sel
	}
	if s := v.Get("fieldSelector"); s != "" {
		if len(s) > maxSelectorBytes {
			return q, fail(http.StatusBadRequest, "", "fieldSelector", fmt.Sprintf("longer than %d bytes", maxSelectorBytes))
		}
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return q, fail(http.StatusBadRequest, "", "fieldSelector", err.Error())
		}
		// Aliases become the label they stand for; an unknown label is
		// refused, as the kube-apiserver refuses it.
		sel, err = sel.Transform(func(label, value string) (string, string, error) {
			if label == "metadata.name" || label == "metadata.namespace" {
				return label, value, nil
			}
			if to, ok := d.Fields[label]; ok {
				return to, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		})
		if err != nil {
			return q, fail(http.StatusBadRequest, "", "fieldSelector", err.Error())
		}
		q.fields = sel
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, fail(http.StatusBadRequest, "", "limit", "must be an integer from 1 to 1000")
		}
		q.limit = n
	}
	q.continue_ = v.Get("continue")
	if len(q.continue_) > 1024 {
		return q, fail(http.StatusBadRequest, "", "continue", "invalid continue token")
	}
	return q, nil
}

// attributes is what reading q asks of the policy.
func (q objectQuery) attributes(verb string) rbac.Attributes {
	return rbac.Attributes{Verb: verb, APIGroup: q.def.Group, Resource: q.def.Resource, Namespace: q.namespace, Name: q.name}
}

// authorizeRead authorizes q (get, list or watch); a list across
// namespaces of a namespaced kind is limited to where the caller may list.
func (s *Server) authorizeRead(r *http.Request, q *objectQuery, verb string) error {
	if q.name != "" && verb == "list" {
		verb = "get"
	}
	if q.def.Namespaced && q.namespace == "" {
		nss, err := s.visibleNamespaces(r, q.attributes(verb))
		if err != nil {
			return err
		}
		q.namespaces = nss
		return nil
	}
	return s.authorize(r, q.attributes(verb))
}

// readObjects answers GET on the object API (watch=true is served by
// watchObjects).
func (s *Server) readObjects(d resourceDef) func(*http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		q, err := parseObjectQuery(r, d)
		if err != nil {
			return 0, nil, err
		}
		if err := s.authorizeRead(r, &q, "list"); err != nil {
			return 0, nil, err
		}
		// The list's resourceVersion is the projection's position, read
		// before the objects: a watch from it misses nothing.
		seq, err := s.store.LastSeq(r.Context())
		if err != nil {
			return 0, nil, err
		}
		items, next, err := s.objects(r.Context(), q)
		if err != nil {
			return 0, nil, err
		}
		if q.name != "" {
			if len(items) == 0 {
				object := d.Kind + "/" + q.name
				if q.namespace != "" {
					object = d.Kind + "/" + q.namespace + "/" + q.name
				}
				return 0, nil, fail(http.StatusNotFound, object, "", "not found")
			}
			return http.StatusOK, items[0].Object, nil
		}
		out := make([]map[string]any, 0, len(items))
		for _, u := range items {
			out = append(out, u.Object)
		}
		return http.StatusOK, map[string]any{"apiVersion": d.apiVersion(), "kind": d.Kind + "List",
			"metadata": map[string]any{"resourceVersion": strconv.FormatUint(seq, 10), "continue": next}, "items": out}, nil
	}
}

// objects reads what q selects, as Kueue objects.
func (s *Server) objects(ctx context.Context, q objectQuery) ([]*unstructured.Unstructured, string, error) {
	if q.def.Kind == api.KindWorkload {
		return s.workloadObjects(ctx, q)
	}
	name := q.name
	if q.def.Kind == api.KindConfiguration {
		if name != "" && name != "default" {
			return nil, "", nil
		}
		name = "default"
	}
	rows, err := s.store.ConfigObjects(ctx, q.def.Kind, q.namespace, name)
	if err != nil {
		return nil, "", err
	}
	var facts store.QueueFacts
	var cqs map[string]*status.ClusterQueueFacts
	if q.def.Kind == api.KindClusterQueue || q.def.Kind == api.KindLocalQueue {
		if facts, err = s.store.Queues(ctx); err != nil {
			return nil, "", err
		}
		if cqs, err = s.clusterQueueFacts(ctx, facts); err != nil {
			return nil, "", err
		}
	}
	allowed := namespaceSet(q.namespaces)
	var out []*unstructured.Unstructured
	for _, row := range rows {
		if allowed != nil && !allowed[row.Namespace] {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(row.Object); err != nil {
			return nil, "", fmt.Errorf("%s %s/%s in the projection: %w", row.Kind, row.Namespace, row.Name, err)
		}
		u.SetAPIVersion(q.def.apiVersion())
		u.SetKind(q.def.Kind)
		u.SetName(row.Name)
		u.SetResourceVersion(strconv.FormatUint(row.Seq, 10))
		if !row.Created.IsZero() && row.Created.Unix() != 0 {
			u.SetCreationTimestamp(metav1.NewTime(row.Created.UTC().Truncate(time.Second)))
		}
		var st any
		switch q.def.Kind {
		case api.KindClusterQueue:
			f := cqs[row.Name]
			if f == nil {
				continue // deleted between the two reads
			}
			st = status.ClusterQueue(*f)
		case api.KindLocalQueue:
			var lq api.LocalQueue
			_ = json.Unmarshal(row.Object, &lq)
			k := [2]string{row.Namespace, row.Name}
			st = status.LocalQueue(status.LocalQueueFacts{ClusterQueue: cqs[lq.Spec.ClusterQueue], Usage: facts.LQUsage[k],
				Pending: facts.LQPending[k], Admitted: facts.LQAdmitted[k], Since: row.Updated,
				Stopped: lq.Spec.StopPolicy != nil && *lq.Spec.StopPolicy != api.StopPolicyNone && *lq.Spec.StopPolicy != ""})
		}
		if st != nil {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
			if err != nil {
				return nil, "", err
			}
			u.Object["status"] = m
		}
		if s.matches(q, u, nil) {
			out = append(out, u)
		}
	}
	return out, "", nil
}

// clusterQueueFacts gathers what every ClusterQueue's status needs.
func (s *Server) clusterQueueFacts(ctx context.Context, facts store.QueueFacts) (map[string]*status.ClusterQueueFacts, error) {
	cqRows, err := s.store.ConfigObjects(ctx, api.KindClusterQueue, "", "")
	if err != nil {
		return nil, err
	}
	rfRows, err := s.store.ConfigObjects(ctx, api.KindResourceFlavor, "", "")
	if err != nil {
		return nil, err
	}
	flavors := map[string]bool{}
	for _, rf := range rfRows {
		flavors[rf.Name] = true
	}
	out := map[string]*status.ClusterQueueFacts{}
	for _, row := range cqRows {
		var cq api.ClusterQueue
		if err := json.Unmarshal(row.Object, &cq); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s in the projection: %w", row.Name, err)
		}
		usage := facts.CQUsage[row.Name]
		if usage == nil {
			usage = map[quota.FlavorResource]int64{}
		}
		out[row.Name] = &status.ClusterQueueFacts{Spec: cq.Spec, Usage: usage, Pending: facts.CQPending[row.Name],
			Admitted: facts.CQAdmitted[row.Name], Flavors: flavors, Since: row.Updated}
	}
	return out, nil
}

// workloadObjects reads one page of workloads as Kueue Workloads. The
// selectors are evaluated in the query (store.Requirement), so a page is
// one query however few rows match; matches checks each row again, and
// in the rare case it drops one the query kept (a label value Gt or Lt
// compares beyond int64) the next query reads a page as large again.
func (s *Server) workloadObjects(ctx context.Context, q objectQuery) ([]*unstructured.Unstructured, string, error) {
	match, ok := selectorRequirements(q)
	if !ok {
		return nil, "", nil // a selector nothing meets
	}
	f := store.Filter{Namespace: q.namespace, Name: q.name, Namespaces: q.namespaces, After: q.continue_, Limit: q.limit, Match: match}
	var out []*unstructured.Unstructured
	for {
		rows, next, err := s.store.WorkloadObjects(ctx, f)
		if errors.Is(err, store.ErrBadCursor) {
			return nil, "", fail(http.StatusBadRequest, "", "continue", "invalid continue token")
		}
		if err != nil {
			return nil, "", err
		}
		for i, row := range rows {
			u, err := workloadObject(row)
			if err != nil {
				return nil, "", err
			}
			if !s.matches(q, u, fields.Set{"status": row.Status, "clusterQueue": row.ClusterQueue}) {
				continue
			}
			out = append(out, u)
			if len(out) == q.limit {
				if i < len(rows)-1 {
					// The page is full within the rows read: the
					// next one starts after this row.
					next = store.Cursor(row.Namespace, row.Name)
				}
				return out, next, nil
			}
		}
		if next == "" {
			return out, "", nil
		}
		f.After = next
	}
}

// selectorRequirements turns q's label and field selectors into the
// store's requirements; false when no object can meet them.
func selectorRequirements(q objectQuery) ([]store.Requirement, bool) {
	var out []store.Requirement
	reqs, selectable := q.labels.Requirements()
	if !selectable {
		return nil, false
	}
	for _, r := range reqs {
		req := store.Requirement{Label: r.Key(), Values: r.ValuesUnsorted()}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			req.Op = store.OpIn
		case selection.NotEquals, selection.NotIn:
			req.Op = store.OpNotIn
		case selection.Exists:
			req.Op = store.OpExists
		case selection.DoesNotExist:
			req.Op = store.OpDoesNotExist
		case selection.GreaterThan:
			req.Op = store.OpGreaterThan
		case selection.LessThan:
			req.Op = store.OpLessThan
		default:
			continue // left to matches
		}
		out = append(out, req)
	}
	for _, r := range q.fields.Requirements() {
		if _, ok := store.WorkloadFields[r.Field]; !ok {
			continue // left to matches
		}
		req := store.Requirement{Field: r.Field, Values: []string{r.Value}}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			req.Op = store.OpIn
		case selection.NotEquals:
			req.Op = store.OpNotIn
		default:
			continue
		}
		out = append(out, req)
	}
	return out, true
}

// workloadObject renders a projected workload as Kueue's Workload.
func workloadObject(row store.WorkloadObject) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if len(row.Object) > 0 {
		if err := u.UnmarshalJSON(row.Object); err != nil {
			return nil, fmt.Errorf("workload %s/%s in the projection: %w", row.Namespace, row.Name, err)
		}
	}
	u.SetAPIVersion(api.KueueAPIVersion)
	u.SetKind(api.KindWorkload)
	u.SetNamespace(row.Namespace)
	u.SetName(row.Name)
	u.SetUID(types.UID(row.UID))
	u.SetResourceVersion(strconv.FormatUint(row.Seq, 10))
	u.SetCreationTimestamp(metav1.NewTime(row.CreatedAt.UTC()))
	_ = unstructured.SetNestedField(u.Object, row.LocalQueue, "spec", "queueName")
	_ = unstructured.SetNestedField(u.Object, int64(row.Priority), "spec", "priority")
	if row.Status == store.StatusInactive {
		_ = unstructured.SetNestedField(u.Object, false, "spec", "active")
	}
	st := struct {
		Admission    *status.Admission    `json:"admission,omitempty"`
		RequeueState *status.RequeueState `json:"requeueState,omitempty"`
		Conditions   []metav1.Condition   `json:"conditions,omitempty"`
	}{status.AdmissionOf(row.Admission), row.Kueue.RequeueState, row.Kueue.Conditions}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return nil, err
	}
	u.Object["status"] = m
	return u, nil
}

// matches says whether an object is selected by q's labels and fields;
// extra holds field values that are not paths of the object.
func (s *Server) matches(q objectQuery, u *unstructured.Unstructured, extra fields.Set) bool {
	if !q.labels.Matches(labels.Set(u.GetLabels())) {
		return false
	}
	set := fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}
	for _, to := range q.def.Fields {
		if v, ok := extra[to]; ok {
			set[to] = v
			continue
		}
		v, _, _ := unstructured.NestedString(u.Object, strings.Split(to, ".")...)
		set[to] = v
	}
	return q.fields.Matches(set)
}

func namespaceSet(nss []string) map[string]bool {
	if nss == nil {
		return nil
	}
	m := make(map[string]bool, len(nss))
	for _, ns := range nss {
		m[ns] = true
	}
	return m
}
