package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"k8s.io/apimachinery/pkg/types"
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

type submitted struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Seq       uint64 `json:"seq"`
}

// submit accepts one Workload or Job, or several at once (multi-document
// YAML or a List): those are validated together, published together as one
// atomic batch (all or none), and considered by admission in the same
// cycle.
//
// Idempotency is keyed to the body. With an Idempotency-Key, the event id
// derives from the key, so JetStream's dedupe answers a retry with the
// first submission; without one, from the document and its name's position
// in the log. Either way the event records the digest of the document the
// client sent, and the same key or name with another document is 409. A
// different workload under a taken name fails the subject fence: 409.
func (s *Server) submit(r *http.Request) (int, any, error) {
	if err := s.admit(r.Context()); err != nil {
		return 0, nil, err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return 0, nil, err
	}
	objs, err := s.decode(r)
	if err != nil {
		return 0, nil, err
	}
	if len(objs) > bus.MaxAtomic {
		return 0, nil, fail(http.StatusRequestEntityTooLarge, "", "", fmt.Sprintf("%d documents: at most %d per request", len(objs), bus.MaxAtomic))
	}
	// Every document is authorized before any is validated or published:
	// a Workload is create on workloads, a Job create on jobs, in its
	// namespace. A caller who may not create there learns nothing from
	// validation (whether a class or a name exists).
	attrs := make([]rbac.Attributes, 0, len(objs))
	for _, o := range objs {
		a := objectAttributes("create", o)
		a.Name = ""
		attrs = append(attrs, a)
	}
	if err := s.authorize(r, attrs...); err != nil {
		return 0, nil, err
	}
	subs := make([]*submission, 0, len(objs))
	for i, o := range objs {
		sub, err := s.prepare(r.Context(), o, key, i, len(objs))
		if err != nil {
			return 0, nil, err
		}
		subs = append(subs, sub)
	}
	if err := s.explicitPriorities(r, objs, subs); err != nil {
		return 0, nil, err
	}
	if len(subs) == 1 {
		return s.publishSubmission(r.Context(), subs[0])
	}
	return s.publishSubmissions(r.Context(), subs)
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 256

// idempotencyKey reads the Idempotency-Key header: at most
// maxIdempotencyKey bytes of printable ASCII.
func idempotencyKey(r *http.Request) (string, error) {
	k, err := onlyOnce(r.Header.Values("Idempotency-Key"), "Idempotency-Key")
	if err != nil {
		return "", err
	}
	if len(k) > maxIdempotencyKey {
		return "", fail(http.StatusBadRequest, "", "Idempotency-Key", fmt.Sprintf("%d bytes: at most %d", len(k), maxIdempotencyKey))
	}
	if strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", fail(http.StatusBadRequest, "", "Idempotency-Key", "only printable ASCII characters are allowed")
	}
	return k, nil
}

// submission is one validated workload ready to publish.
type submission struct {
	wl *api.Workload
	// id is the event's id; keyed says it derives from an Idempotency-Key;
	// doc is the digest of the document the client sent.
	id      string
	keyed   bool
	doc     string
	subject string
	// seq and prev are the subject's last event, as far as known: located
	// says they were read, else the subject is assumed empty.
	seq     uint64
	prev    *events.Event
	located bool
	// derivedUID says the UID is derived from the id (the client gave
	// none).
	derivedUID bool
}

// prepare validates (and converts) one submitted object and derives its
// event id: from the key (and its place in a multi-document request), else
// from the document and its subject's position, so that the same workload
// submitted again after its deletion is a new event rather than a
// duplicate JetStream would drop. It does not read the position: it
// assumes the subject empty, as it is for nearly every submission, and
// publishSubmission learns otherwise from the fence and calls locate.
func (s *Server) prepare(ctx context.Context, o api.Object, key string, index, count int) (*submission, error) {
	if err := api.Validate(o); err != nil {
		return nil, invalid(err)
	}
	doc, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	wl, err := s.toWorkload(ctx, o)
	if err != nil {
		return nil, err
	}
	sub := &submission{wl: wl, doc: digest("document", string(doc)), keyed: key != "", derivedUID: wl.UID == "" || !keepsUID(ctx)}
	if sub.keyed {
		sub.id = digest("submit-key", wl.Namespace, key)
		if count > 1 {
			sub.id = digest(sub.id, strconv.Itoa(index))
		}
	}
	if wl.Name == "" {
		// A retry under the same key gets the same name.
		suffix := strings.ToLower(nuid.Next()[17:])
		if sub.keyed {
			suffix = sub.id[:5]
		}
		wl.Name = wl.GenerateName + suffix
	}
	if err := api.Validate(wl); err != nil {
		return nil, invalid(err)
	}
	sub.subject = events.WorkloadSubject(wl.Namespace, wl.Name)
	sub.at(0, nil)
	return sub, nil
}

// locate reads the submission's subject's position, and derives again
// what depends on it.
func (s *Server) locate(ctx context.Context, sub *submission) error {
	seq, prev, err := s.last(ctx, sub.subject)
	if err != nil {
		return err
	}
	sub.at(seq, prev)
	sub.located = true
	return nil
}

// at places the submission after the subject's last event prev (at seq; 0
// and nil for an empty subject): an unkeyed id, and the UID derived from
// the id, depend on it.
func (sub *submission) at(seq uint64, prev *events.Event) {
	sub.seq, sub.prev = seq, prev
	wl := sub.wl
	if !sub.keyed {
		sub.id = digest("submit", wl.Namespace, wl.Name, sub.doc, strconv.FormatUint(seq, 10))
	}
	if sub.derivedUID {
		wl.UID = types.UID(uidFrom(sub.id))
	}
}

// toWorkload returns a submitted Workload, or the Workload of a Job, with
// the priority its classes derive (priority.go).
func (s *Server) toWorkload(ctx context.Context, o api.Object) (*api.Workload, error) {
	switch o := o.(type) {
	case *api.Workload:
		return s.classPriority(ctx, o)
	case *api.Job:
		return s.jobWorkload(ctx, o)
	}
	return nil, fail(http.StatusBadRequest, api.ObjectRef(o), "kind", "only Workload and batch/v1 Job can be submitted")
}

// fresh says whether the submission's name is free: its subject is empty
// or ends in a deletion or expiry. It returns the fence to publish at.
func (sub *submission) fresh() (expect uint64, ok bool) {
	switch {
	case sub.prev == nil:
		return 0, true
	case events.Ends(sub.prev.Type):
		return sub.seq, true
	}
	return 0, false
}

// submittedEvent is the WorkloadSubmitted of a submission.
func (s *Server) submittedEvent(sub *submission, batch *events.Batch) events.Event {
	wl := sub.wl
	raw, _ := json.Marshal(wl)
	ev := s.event(events.WorkloadSubmitted, sub.subject, &events.WorkloadSubmittedData{
		WorkloadRef: events.WorkloadRef{Namespace: wl.Namespace, Name: wl.Name}, Workload: raw,
		CreatedAt: s.createdAt(), RequestDigest: sub.doc})
	ev.ID, ev.Batch = sub.id, batch
	return ev
}

// publishSubmission publishes one workload, fenced on its subject. It
// first publishes as if the subject were empty (one round trip, not two):
// the fence stores the event only if it is, and then this is exactly what
// a publish after reading the subject would have stored. When the fence
// fails, or JetStream holds the event already, nothing was stored, and
// the submission is published as read from the subject.
func (s *Server) publishSubmission(ctx context.Context, sub *submission) (int, any, error) {
	if !sub.located {
		var empty uint64
		got, dup, err := bus.Publish(ctx, s.js, s.submittedEvent(sub, nil), &empty)
		switch {
		case err == nil && !dup:
			return http.StatusAccepted, submitted{Namespace: sub.wl.Namespace, Name: sub.wl.Name, UID: string(sub.wl.UID), Seq: got}, nil
		case err != nil && !errors.Is(err, bus.ErrConflict):
			return 0, nil, err
		}
		if err := s.locate(ctx, sub); err != nil {
			return 0, nil, err
		}
	}
	expect, ok := sub.fresh()
	if !ok {
		return s.resubmitted(ctx, sub)
	}
	got, dup, err := bus.Publish(ctx, s.js, s.submittedEvent(sub, nil), &expect)
	if errors.Is(err, bus.ErrConflict) {
		return 0, nil, nameTaken(sub.wl)
	}
	if err != nil {
		return 0, nil, err
	}
	if dup {
		code, ans, err := s.duplicate(ctx, sub, got)
		if !errors.Is(err, errOriginalGone) {
			return code, ans, err
		}
		// The event JetStream deduplicated it against was purged (its
		// workload ended and the log's retention dropped it within the
		// duplicate window): this is a new submission. Its fence still
		// makes it the only one under the name.
		ev := s.submittedEvent(sub, nil)
		ev.ID = digest(sub.id, "after-purge", nuid.Next())
		if got, _, err = bus.Publish(ctx, s.js, ev, &expect); errors.Is(err, bus.ErrConflict) {
			return 0, nil, nameTaken(sub.wl)
		} else if err != nil {
			return 0, nil, err
		}
	}
	return http.StatusAccepted, submitted{Namespace: sub.wl.Namespace, Name: sub.wl.Name, UID: string(sub.wl.UID), Seq: got}, nil
}

// publishSubmissions publishes the workloads of a multi-document request
// whose names are free as one atomic batch, and answers the others as
// resubmissions. If any of the batch cannot be stored (a name taken
// meanwhile, an event JetStream already holds), none is.
func (s *Server) publishSubmissions(ctx context.Context, subs []*submission) (int, any, error) {
	for _, sub := range subs {
		if err := s.locate(ctx, sub); err != nil {
			return 0, nil, err
		}
	}
	answers := make([]submitted, len(subs))
	var fresh []int
	var writes []bus.Write
	for i, sub := range subs {
		expect, ok := sub.fresh()
		if !ok {
			_, ans, err := s.resubmitted(ctx, sub)
			if err != nil {
				return 0, nil, err
			}
			answers[i] = ans.(submitted)
			continue
		}
		fresh = append(fresh, i)
		writes = append(writes, bus.Write{ExpectLast: &expect})
	}
	if len(fresh) == 0 {
		return http.StatusOK, map[string]any{"items": answers}, nil
	}
	batch := &events.Batch{ID: nuid.Next(), Size: len(fresh)}
	for k, i := range fresh {
		writes[k].Event = s.submittedEvent(subs[i], batch)
	}
	seqs, err := bus.PublishAtomic(ctx, s.js, writes)
	switch {
	case errors.Is(err, bus.ErrConflict):
		return 0, nil, fail(http.StatusConflict, "", "metadata.name",
			"a workload of this request was submitted or deleted meanwhile; nothing was submitted; submit again")
	case errors.Is(err, bus.ErrDuplicateInBatch):
		return 0, nil, fail(http.StatusConflict, "", "Idempotency-Key",
			"part of this request was already submitted under this key (within "+bus.DefaultDuplicates.String()+"); nothing was submitted")
	case err != nil:
		return 0, nil, err
	}
	for k, i := range fresh {
		wl := subs[i].wl
		answers[i] = submitted{Namespace: wl.Namespace, Name: wl.Name, UID: string(wl.UID), Seq: seqs[k]}
	}
	return http.StatusAccepted, map[string]any{"items": answers}, nil
}

// errOriginalGone means the event a publish was deduplicated against is
// no longer in the stream.
var errOriginalGone = errors.New("the original of a deduplicated event was purged")

// duplicate answers a submission JetStream dropped as a duplicate of the
// event at seq: the first submission's answer if it is the same document
// (a retry), else 409 naming the key reused for another document.
func (s *Server) duplicate(ctx context.Context, sub *submission, seq uint64) (int, any, error) {
	m, err := s.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, errOriginalGone
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read the submission at %d: %w", seq, err)
	}
	ev, err := events.Parse(m.Header.Get, m.Data)
	if err != nil {
		return 0, nil, fmt.Errorf("read the submission at %d: %w", seq, err)
	}
	first, ok := ev.Data.(*events.WorkloadSubmittedData)
	if !ok {
		return 0, nil, fmt.Errorf("event %s at %d is a %s, not a submission", ev.ID, seq, ev.Type)
	}
	if !sameDocument(first, sub) {
		return 0, nil, keyReused(sub.wl)
	}
	return http.StatusOK, answer(first, seq), nil
}

// resubmitted answers a submission under a name that is taken: the same
// answer as before if it is the same submission (same document, and the
// same Idempotency-Key if one was given), else 409.
func (s *Server) resubmitted(ctx context.Context, sub *submission) (int, any, error) {
	cur, curSeq, err := s.currentSubmission(ctx, sub.subject)
	if err != nil {
		return 0, nil, err
	}
	switch {
	case cur == nil, sub.keyed && cur.ID != sub.id:
		return 0, nil, nameTaken(sub.wl)
	case !sameDocument(cur.Data.(*events.WorkloadSubmittedData), sub) && sub.keyed:
		return 0, nil, keyReused(sub.wl)
	case !sameDocument(cur.Data.(*events.WorkloadSubmittedData), sub):
		return 0, nil, nameTaken(sub.wl)
	}
	return http.StatusOK, answer(cur.Data.(*events.WorkloadSubmittedData), curSeq), nil
}

// currentSubmission is the WorkloadSubmitted of the workload living on a
// subject, and its sequence; nil when the last one was deleted.
func (s *Server) currentSubmission(ctx context.Context, subject string) (*events.Event, uint64, error) {
	var cur *events.Event
	var curSeq uint64
	for next := uint64(1); ; {
		m, err := s.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return cur, curSeq, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if ev, err := events.Parse(m.Header.Get, m.Data); err == nil {
			switch ev.Type {
			case events.WorkloadSubmitted:
				cur, curSeq = &ev, m.Sequence
			case events.WorkloadDeleted, events.WorkloadExpired:
				cur = nil
			}
		}
		next = m.Sequence + 1
	}
}

// sameDocument says whether a stored submission is of the document the
// client sent now. Of a submission stored before documents had digests,
// only its key is known: the same key counts as the same submission (its
// id was checked), and without a key nothing proves it.
func sameDocument(stored *events.WorkloadSubmittedData, sub *submission) bool {
	if stored.RequestDigest == "" {
		return sub.keyed
	}
	return stored.RequestDigest == sub.doc
}

func answer(d *events.WorkloadSubmittedData, seq uint64) submitted {
	var wl api.Workload
	_ = json.Unmarshal(d.Workload, &wl)
	return submitted{Namespace: d.Namespace, Name: d.Name, UID: string(wl.UID), Seq: seq}
}

func nameTaken(wl *api.Workload) error {
	return fail(http.StatusConflict, "Workload/"+wl.Namespace+"/"+wl.Name, "metadata.name", "a different workload with this name exists")
}

func keyReused(wl *api.Workload) error {
	return fail(http.StatusConflict, "Workload/"+wl.Namespace+"/"+wl.Name, "Idempotency-Key",
		"this key was used for a different document; a key is remembered while its workload lives, and for "+
			bus.DefaultDuplicates.String()+" (JQ_EVENTS' duplicate window) under any name")
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

func uidFrom(id string) string {
	return id[0:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32]
}

// workloadAction publishes a state change of an existing workload.
func (s *Server) workloadAction(typ events.Type) func(*http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		ns, name := r.PathValue("ns"), r.PathValue("name")
		ref := events.WorkloadRef{Namespace: ns, Name: name}
		object := "Workload/" + ns + "/" + name
		var data any = &ref
		switch typ {
		case events.WorkloadFinished:
			data = &events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: true}
			if b, _ := io.ReadAll(http.MaxBytesReader(nil, r.Body, 4096)); len(strings.TrimSpace(string(b))) > 0 {
				var in struct {
					Succeeded bool `json:"succeeded"`
				}
				if err := strictJSON(b, &in); err != nil {
					return 0, nil, fail(http.StatusBadRequest, object, "succeeded", err.Error())
				}
				data = &events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: in.Succeeded}
			}
		case events.PriorityChanged:
			b, err := s.body(r)
			if err != nil {
				return 0, nil, err
			}
			var in struct {
				Priority *int32 `json:"priority"`
			}
			if err := strictJSON(b, &in); err != nil || in.Priority == nil {
				return 0, nil, fail(http.StatusBadRequest, object, "priority", "want {\"priority\": <int32>}")
			}
			data = &events.PriorityChangedData{WorkloadRef: ref, Priority: *in.Priority}
		case events.ActiveChanged:
			b, err := s.body(r)
			if err != nil {
				return 0, nil, err
			}
			var in struct {
				Active *bool `json:"active"`
			}
			if err := strictJSON(b, &in); err != nil || in.Active == nil {
				return 0, nil, fail(http.StatusBadRequest, object, "active", "want {\"active\": true|false}")
			}
			data = &events.ActiveChangedData{WorkloadRef: ref, Active: *in.Active}
		}
		subject := events.WorkloadSubject(ns, name)
		ev := s.event(typ, subject, data)
		if v := r.Header.Get("JQ-Batch"); v != "" {
			b, err := events.ParseClientBatch(v)
			if err != nil {
				return 0, nil, fail(http.StatusBadRequest, object, "JQ-Batch", err.Error())
			}
			// A batch holds its members' decisions back until the last
			// arrives (or 10s pass): opening one is a privilege of its own.
			if err := s.authorize(r, batchAttributes(ns)); err != nil {
				return 0, nil, err
			}
			ev.Batch = b
		}
		// The fence only guards against acting on a workload deleted in the
		// meantime; admission's own decisions move the subject too, so a
		// conflict is re-read and retried.
		var got uint64
		for attempt := 0; ; attempt++ {
			seq, prev, err := s.last(r.Context(), subject)
			if err != nil {
				return 0, nil, err
			}
			if prev == nil || events.Ends(prev.Type) {
				return 0, nil, fail(http.StatusNotFound, object, "", "workload not found")
			}
			got, _, err = bus.Publish(r.Context(), s.js, ev, &seq)
			if err == nil {
				break
			}
			if !errors.Is(err, bus.ErrConflict) || attempt == 4 {
				return 0, nil, conflictOr(err, object)
			}
		}
		return http.StatusAccepted, map[string]any{"namespace": ns, "name": name, "seq": got}, nil
	}
}

func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	return d.Decode(v)
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

// advanceClock moves the shared manual clock (routed only with
// --manual-clock). Like the simulator's advance, it stops at
// every timer due on the way (the podsready service reports its next), and
// waits there until every service has acted at that instant.
func (s *Server) advanceClock(r *http.Request) (int, any, error) {
	b, err := s.body(r)
	if err != nil {
		return 0, nil, err
	}
	var in struct {
		Duration string `json:"duration"`
	}
	d, perr := time.Duration(0), strictJSON(b, &in)
	if perr == nil {
		d, perr = time.ParseDuration(in.Duration)
	}
	if perr != nil || d < 0 {
		return 0, nil, fail(http.StatusBadRequest, "", "duration", "want {\"duration\": \"6m\"}, a non-negative Go duration")
	}
	ctx, cancel := context.WithTimeout(r.Context(), advanceTimeout)
	defer cancel()
	target := s.clock.Now().Add(d)
	for {
		if err := s.processed(ctx); err != nil {
			return 0, nil, err
		}
		marks, err := bus.ReadMarks(ctx, s.js)
		if err != nil {
			return 0, nil, err
		}
		next := marks[timerService].Next
		now := s.clock.Now()
		if next == nil || next.After(target) || !next.After(now) {
			break
		}
		if _, err := s.clock.Advance(ctx, next.Sub(now)); err != nil {
			return 0, nil, err
		}
	}
	now, err := s.clock.Advance(ctx, target.Sub(s.clock.Now()))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"now": now}, nil
}

// sortedMarks lists the marks' names in order, so that what sync says it
// waits for does not change from one poll to the next.
func sortedMarks(marks map[string]bus.Mark) []string {
	names := make([]string, 0, len(marks))
	for k := range marks {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// deciders are the services whose reactions to an event are themselves
// events; timerService is the one that also acts on the clock.
var deciders = []string{"admission", "preemptor", timerService}

const timerService = "podsready"

// maxSyncTimeout is the longest ?timeout= of GET /v1/sync; advanceTimeout
// bounds one clock advance.
const (
	maxSyncTimeout = 5 * time.Minute
	advanceTimeout = 2 * time.Minute
)

// sync returns once every decider and the projection have processed every
// event published so far (and what they published in turn).
func (s *Server) sync(r *http.Request) (int, any, error) {
	timeout := 10 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxSyncTimeout {
			return 0, nil, fail(http.StatusBadRequest, "", "timeout", "must be a duration up to 5m")
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := s.processed(ctx); err != nil {
		return 0, nil, err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"seq": info.State.LastSeq}, nil
}

// processed waits until every decider that has ever reported (a service
// not deployed is not waited for), the scorer and the projection have
// processed the whole stream, and on the manual clock until the timer
// service has acted at the current time. On timeout it says what it was
// still waiting for.
func (s *Server) processed(ctx context.Context) error {
	for {
		waiting, err := s.waitingFor(ctx)
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			// The answer names what it waited for; why it could not be
			// read (an error that may name the database) goes to the log.
			return &httpError{status: http.StatusGatewayTimeout, cause: err,
				errs: []api.FieldError{{Message: "not every event was processed in time: waiting for " + waiting}}}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitingFor names what has not yet processed the whole stream, or
// returns "" when everything has; err is why a position could not be
// read, for the log only.
func (s *Server) waitingFor(ctx context.Context) (string, error) {
	// Progress first, then the stream's end: a consumer reports its
	// progress only after publishing what it decided on the way, so the
	// end read afterwards includes those decisions.
	marks, err := bus.ReadMarks(ctx, s.js)
	if err != nil {
		return "the progress marks (unreadable)", err
	}
	proj, err := s.store.LastSeq(ctx)
	if err != nil {
		return "the projection (unreadable)", err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return "the stream (unreadable)", err
	}
	end := info.State.LastSeq
	if proj < end {
		return fmt.Sprintf("the projection (at %d of %d)", proj, end), nil
	}
	if m := marks["admission"]; m.Seq < end {
		return fmt.Sprintf("admission (at %d of %d)", m.Seq, end), nil
	}
	// The other admission shards (bus.ProgressName), each deciding its
	// own cohort trees.
	for _, name := range sortedMarks(marks) {
		if m := marks[name]; strings.HasPrefix(name, "admission-") && m.Seq < end {
			return fmt.Sprintf("%s (at %d of %d)", name, m.Seq, end), nil
		}
	}
	for _, name := range deciders {
		if m, ok := marks[name]; ok && m.Seq < end {
			return fmt.Sprintf("%s (at %d of %d)", name, m.Seq, end), nil
		}
	}
	if m, ok := marks[timerService]; ok && s.clock != nil && (m.Clock == nil || m.Clock.Before(s.clock.Now())) {
		acted := "nothing yet"
		if m.Clock != nil {
			acted = m.Clock.Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("%s to act at %s (it has acted up to %s)", timerService, s.clock.Now().Format(time.RFC3339Nano), acted), nil
	}
	// The scorer reports through its durable consumer: nothing left to
	// deliver and nothing unacknowledged means every Placed is published
	// (it acknowledges after publishing).
	c, err := s.stream.Consumer(ctx, events.ScorerDurable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", nil
	}
	if err != nil {
		return "the scorer (unreadable)", err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return "the scorer (unreadable)", err
	}
	if ci.NumPending > 0 || ci.NumAckPending > 0 {
		return fmt.Sprintf("the scorer (%d to deliver, %d unacknowledged)", ci.NumPending, ci.NumAckPending), nil
	}
	return "", nil
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
