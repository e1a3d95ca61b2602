package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"k8s.io/apimachinery/pkg/version"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// recordingMux is a ServeMux that remembers its patterns, so the API
// reference can be held to the routes (openapi.go).
type recordingMux struct {
	*http.ServeMux
	patterns []string
}

func (m *recordingMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, h)
}

func (s *Server) routes() http.Handler {
	h, _ := s.routeTable()
	return h
}

// routeTable builds the API's handler and lists its route patterns.
func (s *Server) routeTable() (http.Handler, []string) {
	mux := &recordingMux{ServeMux: http.NewServeMux()}
	// check runs before the handler: it authorizes the request (see
	// access.go), or for routes whose permission depends on the body or
	// the result (apply, submit, lists) only requires an identity and the
	// handler authorizes the rest before it publishes or answers.
	handle := func(pattern string, check func(*http.Request) error, h func(*http.Request) (int, any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r = s.withVisibility(withRequestID(w, r))
			if wait, ok := longWaits[pattern]; ok {
				extendWrite(w, wait)
			}
			if err := check(r); err != nil {
				s.writeError(w, r, err)
				return
			}
			status, body, err := h(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			writeJSON(w, status, body)
		})
	}
	may := func(attrs func(*http.Request) rbac.Attributes) func(*http.Request) error {
		return func(r *http.Request) error { return s.authorize(r, attrs(r)) }
	}
	identified := func(r *http.Request) error { _, err := s.caller(r); return err }
	handle("POST /v1/apply", identified, s.apply)
	handle("DELETE /v1/{kind}/{name}", identified, s.deleteConfig)
	handle("DELETE /v1/{kind}/{namespace}/{name}", identified, s.deleteConfig)
	handle("POST /v1/workloads", identified, s.submit)
	handle("GET /v1/workloads", identified, s.readAfter(s.list))
	handle("GET /v1/workloads/{ns}/{name}", may(workloadAttributes("get", "")), s.readAfter(s.get))
	handle("DELETE /v1/workloads/{ns}/{name}", may(workloadAttributes("delete", "")), s.workloadAction(events.WorkloadDeleted))
	handle("POST /v1/workloads/{ns}/{name}/finish", may(workloadAttributes("create", "finish")), s.workloadAction(events.WorkloadFinished))
	handle("POST /v1/workloads/{ns}/{name}/podsready", may(workloadAttributes("create", "podsready")), s.workloadAction(events.PodsReady))
	handle("POST /v1/workloads/{ns}/{name}/priority", may(workloadAttributes("create", "priority")), s.workloadAction(events.PriorityChanged))
	// spec.active is the workload's own field: changing it is update on
	// workloads, as kueuectl's stop and resume workload patch it.
	handle("POST /v1/workloads/{ns}/{name}/active", may(workloadAttributes("update", "")), s.workloadAction(events.ActiveChanged))
	handle("GET /v1/workloads/{ns}/{name}/explain", may(workloadAttributes("get", "")), s.readAfter(s.explain))
	handle("GET /v1/clusterqueues", may(func(*http.Request) rbac.Attributes {
		return rbac.Attributes{Verb: "list", APIGroup: groupKueue, Resource: "clusterqueues"}
	}), s.readAfter(s.clusterQueues))
	handle("GET /v1/clusterqueues/{name}", may(func(r *http.Request) rbac.Attributes {
		return rbac.Attributes{Verb: "get", APIGroup: groupKueue, Resource: "clusterqueues", Name: r.PathValue("name")}
	}), s.readAfter(s.clusterQueues))
	s.visibilityRoutes(handle, may, identified)
	// The Kueue object API (objects.go): Kueue's objects at Kubernetes'
	// paths; ?watch=true streams changes (watch.go).
	for pattern, d := range objectRoutes() {
		// A read waits for the projection to reach the caller's minSeq
		// (readafter.go), as the /v1 queries do.
		read := s.readAfter(s.readObjects(d))
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r = withRequestID(w, r)
			if _, err := s.caller(r); err != nil {
				s.writeError(w, r, err)
				return
			}
			if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
				if err := s.watchObjects(w, r, d); err != nil {
					s.writeError(w, r, err)
				}
				return
			}
			status, body, err := read(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			writeJSON(w, status, body)
		})
	}
	handle("GET /version", identified, serverVersion)
	handle("GET /v1/sync", identified, s.sync)
	handle("POST /v1/whatif", identified, s.whatIf)
	handle("GET /v1/eta", identified, s.pendingETAs)
	mux.HandleFunc("GET /v1/watch/workloads", s.watchWorkloads)
	// The manual clock's endpoint exists only with --manual-clock. Without
	// it the path still answers 404 itself: left to the mux, it would match
	// DELETE /v1/{kind}/{namespace}/{name} and answer 405.
	if s.clock != nil {
		handle("POST /v1/debug/clock/advance", may(nonResource), s.advanceClock)
	} else {
		handle("POST /v1/debug/clock/advance", identified, func(*http.Request) (int, any, error) {
			return 0, nil, fail(http.StatusNotFound, "", "", "the manual clock is off (start with --manual-clock)")
		})
	}
	handle("POST /v1/projection/rebuild", may(nonResource), s.rebuildProjection)
	handle("GET /v1/projection/rebuild", may(nonResource), s.projectionProgress)
	handle("GET /openapi/v3", identified, func(*http.Request) (int, any, error) { return http.StatusOK, OpenAPI(), nil })
	return mux, mux.patterns
}

// longWaits are the routes that wait on purpose, and their longest wait:
// their write deadline is extended beyond the server's WriteTimeout.
var longWaits = map[string]time.Duration{
	"GET /v1/sync":                 maxSyncTimeout,
	"POST /v1/debug/clock/advance": advanceTimeout,
	"POST /v1/whatif":              replayTimeout + whatIfTimeout,
}

// body reads a request body up to the configured limit.
func (s *Server) body(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fail(http.StatusRequestEntityTooLarge, "", "", fmt.Sprintf("body larger than %d bytes", s.cfg.MaxBody))
	}
	if err != nil {
		return nil, fail(http.StatusBadRequest, "", "", err.Error())
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fail(http.StatusBadRequest, "", "", "empty body")
	}
	return data, nil
}

// decode reads and decodes a request's manifests.
func (s *Server) decode(r *http.Request) ([]api.Object, error) {
	return s.decodeWith(r, api.DecodeOptions{})
}

// decoded is a body a caller in the process has decoded already (a durable
// submission, checked for its namespace first): the route reads its
// objects instead of decoding the same bytes again.
type decoded struct {
	data []byte
	objs []api.Object
	err  error
}

type decodedKey struct{}

// decodeWith is decode with options.
func (s *Server) decodeWith(r *http.Request, o api.DecodeOptions) ([]api.Object, error) {
	data, err := s.body(r)
	if err != nil {
		return nil, err
	}
	var objs []api.Object
	if d, ok := r.Context().Value(decodedKey{}).(*decoded); ok && o == (api.DecodeOptions{}) && bytes.Equal(d.data, data) {
		objs, err = d.objs, d.err
	} else {
		objs, err = api.DecodeWith(data, o)
	}
	if err != nil {
		return nil, invalid(err)
	}
	return objs, nil
}

// last returns the last event on a subject and its sequence; 0 and nil
// when the subject is empty.
func (s *Server) last(ctx context.Context, subject string) (uint64, *events.Event, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	ev, err := events.Parse(m.Header.Get, m.Data)
	if err != nil {
		return m.Sequence, nil, err
	}
	return m.Sequence, &ev, nil
}

func (s *Server) event(typ events.Type, subject string, data any) events.Event {
	return events.Event{ID: nuid.Next(), Type: typ, Source: "jetqueue/ingest", Time: s.cfg.Now().UTC(), Subject: subject, Data: data}
}

type applied struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Action    string `json:"action"`
	// Object is, in a dry run, the object as it would be stored
	// (decoded and defaulted), so a client can show what would change.
	Object json.RawMessage `json:"object,omitempty"`
}

var configKinds = map[string]bool{api.KindResourceFlavor: true, api.KindClusterQueue: true, api.KindLocalQueue: true,
	api.KindWorkloadPriorityClass: true, api.KindPriorityClass: true, api.KindConfiguration: true}

// apply validates every document, then publishes them as one atomic
// batch: JetStream stores every change or none, and checks each one's
// fence (the object's position when it was read) at the commit, so a
// conflict on any document leaves nothing of the request applied.
//
// A LocalQueue without metadata.namespace is in the request's `namespace`
// query parameter, else in "default", as kubectl apply -n does.
func (s *Server) apply(r *http.Request) (int, any, error) {
	// dryRun=All, as the kube-apiserver takes it: everything but the
	// publish (decode, validate, authorize, read each object's position).
	dryRun := false
	switch v := r.URL.Query().Get("dryRun"); v {
	case "":
	case "All":
		dryRun = true
	default:
		return 0, nil, fail(http.StatusBadRequest, "", "dryRun", fmt.Sprintf("unsupported value %q: supported values: \"All\"", v))
	}
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = "default"
	}
	objs, err := s.decodeWith(r, api.DecodeOptions{DefaultNamespace: ns})
	if err != nil {
		return 0, nil, err
	}
	if err := validateConfig(objs); err != nil {
		return 0, nil, err
	}
	if err := s.refuseUnshardable(r.Context(), objs); err != nil {
		return 0, nil, err
	}
	// Apply creates or updates: both are asked of every document before
	// anything is read or published, so a refusal leaves nothing applied.
	var attrs []rbac.Attributes
	for _, o := range objs {
		attrs = append(attrs, objectAttributes("create", o), objectAttributes("update", o))
	}
	if err := s.authorize(r, attrs...); err != nil {
		return 0, nil, err
	}
	var writes []bus.Write
	result := make([]applied, 0, len(objs))
	for _, o := range objs {
		w, out, err := s.planApply(r.Context(), o)
		if err != nil {
			return 0, nil, err
		}
		if w != nil {
			writes = append(writes, *w)
		}
		if dryRun {
			if out.Object, err = json.Marshal(o); err != nil {
				return 0, nil, err
			}
		}
		result = append(result, out)
	}
	answer := map[string]any{"applied": result}
	if len(writes) > 0 && !dryRun {
		seqs, err := bus.PublishAtomic(r.Context(), s.js, writes)
		if errors.Is(err, bus.ErrConflict) {
			return 0, nil, fail(http.StatusConflict, "", "", "an object of this request changed concurrently; nothing was applied; apply again")
		}
		if err != nil {
			return 0, nil, err
		}
		// The last write's sequence: a query with ?minSeq= it sees them all.
		answer["seq"] = slices.Max(seqs)
	}
	return http.StatusOK, answer, nil
}

// refuseUnshardable refuses a Configuration that turns on
// waitForPodsReady.blockAdmission while admission runs as several shards
// (JQ_SHARDS): the rule holds every admission of the cluster while one
// admitted workload is not ready, which shards deciding in parallel
// cannot keep, so sharded admission would decide nothing at all.
func (s *Server) refuseUnshardable(ctx context.Context, objs []api.Object) error {
	for _, o := range objs {
		c, ok := o.(*api.Configuration)
		if !ok || c.WaitForPodsReady == nil || !c.WaitForPodsReady.Enable ||
			(c.WaitForPodsReady.BlockAdmission != nil && !*c.WaitForPodsReady.BlockAdmission) {
			continue
		}
		n, err := bus.ReadShardCount(ctx, s.js, "admission")
		if err != nil {
			return fmt.Errorf("read admission's shard count: %w", err)
		}
		if n > 1 {
			return fail(http.StatusUnprocessableEntity, api.ObjectRef(o), "waitForPodsReady.blockAdmission",
				fmt.Sprintf("admission runs as %d shards (%s): blockAdmission holds every admission of the cluster while one admitted workload is not ready, which shards deciding in parallel cannot keep; set it to false, or run admission as one shard", n, bus.ShardsBucket))
		}
	}
	return nil
}

// validateConfig refuses, before anything is read or published, a request
// with a document that is not valid configuration, more documents than one
// atomic batch holds, or one object twice (its second change could not be
// fenced, and which one wins would be a guess).
func validateConfig(objs []api.Object) error {
	if len(objs) > bus.MaxAtomic {
		return fail(http.StatusRequestEntityTooLarge, "", "", fmt.Sprintf("%d documents: at most %d per request", len(objs), bus.MaxAtomic))
	}
	var errs api.Errors
	seen := make(map[events.ConfigRef]bool, len(objs))
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if !configKinds[kind] {
			errs = append(errs, api.FieldError{Object: api.ObjectRef(o), Field: "kind",
				Message: kind + " is not configuration; submit workloads with POST /v1/workloads"})
			continue
		}
		if err := api.Validate(o); err != nil {
			var list api.Errors
			if errors.As(err, &list) {
				errs = append(errs, list...)
			}
			continue
		}
		if ref := configRef(o); seen[ref] {
			errs = append(errs, api.FieldError{Object: api.ObjectRef(o), Field: "metadata.name",
				Message: "appears more than once in this request"})
		} else {
			seen[ref] = true
		}
	}
	if len(errs) > 0 {
		return &httpError{status: http.StatusBadRequest, errs: errs}
	}
	return nil
}

// planApply reads an object's position and says what applying it does:
// the event to publish fenced at that position, or nil when unchanged.
func (s *Server) planApply(ctx context.Context, o api.Object) (*bus.Write, applied, error) {
	ref := configRef(o)
	out := applied{Kind: ref.Kind, Name: ref.Name, Namespace: ref.Namespace, Action: "created"}
	subject := events.ConfigSubject(ref.Kind, ref.Namespace, ref.Name)
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, out, err
	}
	seq, prev, err := s.last(ctx, subject)
	if err != nil {
		return nil, out, err
	}
	if prev != nil && prev.Type == events.ConfigApplied {
		old := prev.Data.(*events.ConfigAppliedData).Object
		if string(old) == string(raw) {
			out.Action = "unchanged"
			return nil, out, nil
		}
		if err := immutable(ref, old, o); err != nil {
			return nil, out, err
		}
		out.Action = "updated"
	}
	ev := s.event(events.ConfigApplied, subject, &events.ConfigAppliedData{ConfigRef: ref, Object: raw})
	return &bus.Write{Event: ev, ExpectLast: &seq}, out, nil
}

func configRef(o api.Object) events.ConfigRef {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if m, ok := o.(interface {
		GetName() string
		GetNamespace() string
	}); ok {
		return events.ConfigRef{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	}
	return events.ConfigRef{Kind: kind, Name: "default"}
}

// immutable refuses changes Kueue's webhooks refuse on update.
func immutable(ref events.ConfigRef, old json.RawMessage, o api.Object) error {
	switch n := o.(type) {
	case *api.ClusterQueue:
		var prev api.ClusterQueue
		if json.Unmarshal(old, &prev) == nil && prev.Spec.QueueingStrategy != n.Spec.QueueingStrategy {
			return fail(http.StatusBadRequest, "ClusterQueue/"+n.Name, "spec.queueingStrategy", "field is immutable")
		}
	case *api.LocalQueue:
		var prev api.LocalQueue
		if json.Unmarshal(old, &prev) == nil && prev.Spec.ClusterQueue != n.Spec.ClusterQueue {
			return fail(http.StatusBadRequest, "LocalQueue/"+n.Namespace+"/"+n.Name, "spec.clusterQueue", "field is immutable")
		}
	}
	return nil
}

// kindNames maps the {kind} of DELETE paths (Kind, lower case or plural).
var kindNames = map[string]string{}

func init() {
	for k := range configKinds {
		if k == api.KindConfiguration {
			continue
		}
		l := strings.ToLower(k)
		kindNames[k], kindNames[l], kindNames[l+"s"], kindNames[strings.TrimSuffix(l, "s")+"es"] = k, k, k, k
		// The resource as Kubernetes names it (workloadpriorityclasses).
		kindNames[kindResources[k][1]] = k
	}
}

func (s *Server) deleteConfig(r *http.Request) (int, any, error) {
	kind, ok := kindNames[r.PathValue("kind")]
	if !ok {
		return 0, nil, fail(http.StatusNotFound, "", "kind", fmt.Sprintf("unknown kind %q", r.PathValue("kind")))
	}
	ref := events.ConfigRef{Kind: kind, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	gr := kindResources[kind]
	if err := s.authorize(r, rbac.Attributes{Verb: "delete", APIGroup: gr[0], Resource: gr[1], Namespace: ref.Namespace, Name: ref.Name}); err != nil {
		return 0, nil, err
	}
	subject := events.ConfigSubject(ref.Kind, ref.Namespace, ref.Name)
	seq, prev, err := s.last(r.Context(), subject)
	if err != nil {
		return 0, nil, err
	}
	if prev == nil || prev.Type == events.ConfigDeleted {
		return 0, nil, fail(http.StatusNotFound, kind+"/"+ref.Name, "", "not found")
	}
	got, _, err := bus.Publish(r.Context(), s.js, s.event(events.ConfigDeleted, subject, &ref), &seq)
	if err != nil {
		return 0, nil, conflictOr(err, kind+"/"+ref.Name)
	}
	return http.StatusOK, map[string]any{"deleted": ref, "seq": got}, nil
}

func conflictOr(err error, object string) error {
	if errors.Is(err, bus.ErrConflict) {
		return fail(http.StatusConflict, object, "", "changed concurrently; try again")
	}
	return err
}

func (s *Server) list(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	f := store.Filter{Namespace: q.Get("namespace"), LocalQueue: q.Get("localQueue"), ClusterQueue: q.Get("clusterQueue"),
		Status: q.Get("status"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return 0, nil, fail(http.StatusBadRequest, "", "limit", "must be an integer from 1 to 1000")
		}
		f.Limit = n
	}
	// A list shows only the namespaces the caller may list workloads in:
	// the query itself is limited to them, so pages and cursors stay
	// what they are for an unrestricted caller.
	list := rbac.Attributes{Verb: "list", APIGroup: groupKueue, Resource: "workloads", Namespace: f.Namespace}
	if f.Namespace != "" {
		if err := s.authorize(r, list); err != nil {
			return 0, nil, err
		}
	} else {
		nss, err := s.visibleNamespaces(r, list)
		if err != nil {
			return 0, nil, err
		}
		f.Namespaces = nss
	}
	if q.Has("at") {
		at, err := s.pointInTime(r)
		if err != nil {
			return 0, nil, err
		}
		if !at.IsZero() {
			return s.listAt(r, f, at)
		}
	}
	items, next, err := s.store.ListWorkloads(r.Context(), f)
	if errors.Is(err, store.ErrBadCursor) {
		return 0, nil, fail(http.StatusBadRequest, "", "after", "invalid cursor")
	}
	if err != nil {
		return 0, nil, err
	}
	if items == nil {
		items = []store.WorkloadView{}
	}
	if v := q.Get("eta"); v != "" && v != "true" && v != "false" {
		return 0, nil, fail(http.StatusBadRequest, "", "eta", "must be true or false")
	} else if v == "true" {
		withETA, err := s.withETA(r, items, time.Time{})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, map[string]any{"items": withETA, "next": next}, nil
	}
	return http.StatusOK, map[string]any{"items": items, "next": next}, nil
}

func (s *Server) get(r *http.Request) (int, any, error) {
	v, hist, err := s.store.GetWorkload(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, fail(http.StatusNotFound, "Workload/"+r.PathValue("ns")+"/"+r.PathValue("name"), "", "not found")
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		store.WorkloadView
		Events []store.Event `json:"events"`
	}{v, s.visibility(r).events(v.ClusterQueue, hist)}, nil
}

func (s *Server) explain(r *http.Request) (int, any, error) {
	if q := r.URL.Query(); q.Has("at") || q.Has("counterfactual") || q.Get("eta") == "true" {
		return s.explainHistory(r)
	}
	ex, err := s.store.Explain(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, fail(http.StatusNotFound, "Workload/"+r.PathValue("ns")+"/"+r.PathValue("name"), "", "not found")
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.visibility(r).explanation(ex), nil
}

func (s *Server) clusterQueues(r *http.Request) (int, any, error) {
	name := r.PathValue("name")
	if r.URL.Query().Has("at") {
		at, err := s.pointInTime(r)
		if err != nil {
			return 0, nil, err
		}
		if !at.IsZero() {
			return s.clusterQueuesAt(r, name, at)
		}
	}
	cqs, err := s.store.ClusterQueues(r.Context(), name)
	if err != nil {
		return 0, nil, err
	}
	if name == "" {
		if cqs == nil {
			cqs = []store.ClusterQueueSummary{}
		}
		return http.StatusOK, map[string]any{"items": cqs}, nil
	}
	if len(cqs) == 0 {
		return 0, nil, fail(http.StatusNotFound, "ClusterQueue/"+name, "", "not found")
	}
	return http.StatusOK, cqs[0], nil
}

// rebuildProjection drops the projection and replays JQ_EVENTS into it;
// GET /v1/sync tells when it has caught up.
func (s *Server) rebuildProjection(r *http.Request) (int, any, error) {
	done := make(chan error, 1)
	select {
	case s.rebuild <- done:
	case <-r.Context().Done():
		return 0, nil, r.Context().Err()
	}
	if err := <-done; err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, map[string]any{"rebuilding": true}, nil
}

// projectionProgress says how far the projection is: the last stream
// sequence written to it and the stream's last, so that a rebuild's
// progress can be followed.
func (s *Server) projectionProgress(r *http.Request) (int, any, error) {
	seq, err := s.store.LastSeq(r.Context())
	if err != nil {
		return 0, nil, err
	}
	info, err := s.stream.Info(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"seq": seq, "streamSeq": info.State.LastSeq}, nil
}

// serverVersion is GET /version: the build's version, as the
// kube-apiserver's /version answers (k8s.io/apimachinery's version.Info).
func serverVersion(*http.Request) (int, any, error) {
	v := version.Info{GitVersion: "(devel)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v.GitVersion = bi.Main.Version
		}
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				v.GitCommit = st.Value
			case "vcs.time":
				v.BuildDate = st.Value
			}
		}
	}
	v.Platform = runtime.GOOS + "/" + runtime.GOARCH
	return http.StatusOK, v, nil
}
