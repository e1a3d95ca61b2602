package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// NATS interfaces of API.md. Request/reply subjects answer exactly as the
// HTTP API does (the same handlers serve both); the status travels in the
// reply's Status header.
const (
	SubjectApply     = "jq.api.v1.apply"
	SubjectSubmit    = "jq.api.v1.workloads.submit"
	SubjectFinish    = "jq.api.v1.workloads.finish"
	SubjectPodsReady = "jq.api.v1.workloads.podsready"
	SubjectDelete    = "jq.api.v1.workloads.delete"
	SubjectPriority  = "jq.api.v1.workloads.priority"

	// SubmitStream holds durable, fire-and-forget submissions, published
	// on jq.submit.<namespace>.<anything> (SubmitSubjectOf).
	SubmitStream  = "JQ_SUBMIT"
	SubmitSubject = "jq.submit.>"
	// SubmitType is the CloudEvents type of a durable submission.
	SubmitType = "io.jetqueue.workload.submit.v1"
	// RejectedType is published on jq.rejected.<namespace>.<ce-id token>
	// when a durable submission is invalid.
	RejectedType = "io.jetqueue.workload.rejected.v1"
)

// Namespaces stand raw in the submission and rejection subjects, unlike
// other user strings (events.Token): the NATS permissions that confine a
// namespace's submitters to them are written by people, and a namespace is
// a DNS-1123 label, which is a valid subject token as it is.

// SubmitSubjectOf is a subject a durable submission to namespace may be
// published on; name is any further token (it is not read).
func SubmitSubjectOf(namespace, name string) string {
	return "jq.submit." + namespace + "." + events.Token(name)
}

// RejectedSubject is where the rejection of a durable submission
// published under namespace goes: only that namespace's submitters may
// read jq.rejected.<namespace>.>.
func RejectedSubject(namespace, ceID string) string {
	return "jq.rejected." + namespace + "." + events.Token(ceID)
}

// submitNamespace is the namespace token of a JQ_SUBMIT subject,
// jq.submit.<namespace>[.…].
func submitNamespace(subject string) string {
	ns, _, _ := strings.Cut(strings.TrimPrefix(subject, "jq.submit."), ".")
	return ns
}

// serveNATS answers the request/reply subjects in the "ingest" queue group,
// so instances share the load. Each request acts as its sender, as the
// NATS server names it (natsUser); one it does not name is
// unauthenticated, as an HTTP request without credentials is.
func (s *Server) serveNATS(nc *nats.Conn, h http.Handler) ([]*nats.Subscription, error) {
	routes := map[string]func(*nats.Msg) (*http.Request, error){
		SubjectApply:  func(m *nats.Msg) (*http.Request, error) { return newRequest("POST", "/v1/apply", m.Data, m) },
		SubjectSubmit: func(m *nats.Msg) (*http.Request, error) { return newRequest("POST", "/v1/workloads", m.Data, m) },
		SubjectFinish: workloadRequest("POST", "finish"), SubjectPodsReady: workloadRequest("POST", "podsready"),
		SubjectDelete: workloadRequest("DELETE", ""), SubjectPriority: workloadRequest("POST", "priority"),
	}
	var subs []*nats.Subscription
	for subject, build := range routes {
		sub, err := nc.QueueSubscribe(subject, "ingest", func(m *nats.Msg) {
			req, err := build(m)
			rec := httptest.NewRecorder()
			if err != nil {
				s.writeError(rec, nil, fail(http.StatusBadRequest, "", "", err.Error()))
			} else {
				h.ServeHTTP(rec, s.asSender(req, m))
			}
			reply := nats.NewMsg(m.Reply)
			reply.Header.Set("Status", strconv.Itoa(rec.Code))
			if ra := rec.Header().Get("Retry-After"); ra != "" {
				// A 503 or 429 says when to ask again, as over HTTP.
				reply.Header.Set("Retry-After", ra)
			}
			reply.Data = rec.Body.Bytes()
			_ = m.RespondMsg(reply)
		})
		if err != nil {
			return subs, err
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// asSender puts the request's sender on its context. Only the server's
// Nats-Request-Info is believed: the server sets it when a request
// crosses a service import, replacing whatever the client sent, and the
// shipped configuration lets no user of jetqueue's own account publish a
// request (natsconf), so a header is never the client's word.
func (s *Server) asSender(req *http.Request, m *nats.Msg) *http.Request {
	r, ok, err := natsconf.ParseRequester(m.Header.Get(natsconf.RequestInfoHeader))
	if err != nil {
		s.log.Warn("NATS request without a usable sender: unauthenticated", zap.String("subject", m.Subject), zap.Error(err))
		return req
	}
	if !ok {
		return req
	}
	return req.WithContext(auth.WithUser(req.Context(), natsUser(r)))
}

// natsUser is the identity of a NATS requester: the user's name (a JWT
// user's name, else its user name or nkey), in group nats:<account>, so
// that a policy can bind one user or a whole account (for example a
// namespace's account, NS_TEAM_A).
func natsUser(r natsconf.Requester) auth.User {
	name := r.User
	if r.Name != "" {
		name = r.Name
	}
	return auth.User{Name: name, UID: "nats:" + r.Account + ":" + r.User,
		Groups: []string{"nats:" + r.Account, auth.GroupAuthenticated}}
}

func newRequest(method, path string, body []byte, m *nats.Msg) (*http.Request, error) {
	req, err := http.NewRequest(method, path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Idempotency-Key", "JQ-Batch"} {
		if v := m.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	return req, nil
}

// workloadRequest maps a body {"namespace","name", ...} to the HTTP path of
// the workload and forwards the remaining fields as the HTTP body.
func workloadRequest(method, verb string) func(*nats.Msg) (*http.Request, error) {
	return func(m *nats.Msg) (*http.Request, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &fields); err != nil {
			return nil, fmt.Errorf("want a JSON object with namespace and name: %v", err)
		}
		var ns, name string
		if json.Unmarshal(fields["namespace"], &ns) != nil || json.Unmarshal(fields["name"], &name) != nil || ns == "" || name == "" {
			return nil, errors.New("namespace and name are required")
		}
		delete(fields, "namespace")
		delete(fields, "name")
		path := "/v1/workloads/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
		if verb != "" {
			path += "/" + verb
		}
		var body []byte
		if len(fields) > 0 {
			body, _ = json.Marshal(fields)
		}
		return newRequest(method, path, body, m)
	}
}

// SubmitLimits bound the submissions waiting in JQ_SUBMIT.
type SubmitLimits struct {
	MaxMsgs, MaxBytes int64
}

// DefaultSubmitLimits are the flags' defaults: a million submissions or
// 1 GiB, whichever comes first.
var DefaultSubmitLimits = SubmitLimits{MaxMsgs: 1_000_000, MaxBytes: 1 << 30}

// Validate refuses a limit that is not positive, naming its flag.
func (l SubmitLimits) Validate() error {
	if l.MaxMsgs <= 0 {
		return fmt.Errorf("--submit-max-msgs %d: must be positive", l.MaxMsgs)
	}
	if l.MaxBytes <= 0 {
		return fmt.Errorf("--submit-max-bytes %d: must be positive", l.MaxBytes)
	}
	return nil
}

// ensureSubmissions declares JQ_SUBMIT and ingest's consumer on it. Ingest
// does so before it reports ready, so that a submitter who waited for it
// never publishes to a stream that does not exist yet.
//
// JQ_SUBMIT is a work queue: a submission leaves it once ingest has
// handled it (accepted into JQ_EVENTS, or rejected). What waits is
// bounded by lim; a full stream refuses new publishes (DiscardNew), so the
// publisher is told its submission was not taken, and nothing JetStream
// acknowledged is ever dropped to make room.
func ensureSubmissions(ctx context.Context, js jetstream.JetStream, lim SubmitLimits) (jetstream.Consumer, error) {
	st, err := bus.Ensure(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: SubmitStream, Subjects: []string{SubmitSubject},
			Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 10 * time.Minute,
			MaxMsgs: lim.MaxMsgs, MaxBytes: lim.MaxBytes, Discard: jetstream.DiscardNew,
			Replicas: bus.Replicas(ctx, js)})
	})
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", SubmitStream, err)
	}
	return bus.EnsureConsumer(ctx, st, bus.ConsumerOptions{Durable: "ingest", MaxDeliver: -1})
}

// consumeSubmissions drains JQ_SUBMIT: each CloudEvent is submitted as if
// posted with its ce-id as Idempotency-Key; an invalid one is answered on
// jq.rejected.<namespace>.<ce-id token>. A submission stays in the stream
// until ingest has handled it, so none is lost while ingest is down.
func (s *Server) consumeSubmissions(ctx context.Context, c jetstream.Consumer, nc *nats.Conn, h http.Handler) error {
	// Each submission costs a round trip to JetStream (more when its name
	// is taken); submitWorkers handle them concurrently, each taking the
	// next message as soon as it is done, so that no submission waits for
	// another's round trip. Submissions of different workloads are
	// independent; two of the same workload are ordered by the subject's
	// fence.
	it, err := c.Messages(jetstream.PullMaxMessages(2 * submitWorkers))
	if err != nil {
		return err
	}
	// When ctx ends, what the iterator holds is still handled (Drain),
	// rather than left to be delivered again after the ack wait.
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range submitWorkers {
		wg.Go(func() {
			for m := range work {
				s.submitDurable(nc, h, m)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // drained
			}
			// A closed connection or a deleted consumer: ingest restarts.
			return fmt.Errorf("read %s: %w", SubmitStream, err)
		}
		work <- m
	}
}

// submitWorkers is how many durable submissions ingest handles at once.
const submitWorkers = 128

func (s *Server) submitDurable(nc *nats.Conn, h http.Handler, m jetstream.Msg) {
	id := m.Headers().Get(events.HeaderID)
	ns := submitNamespace(m.Subject())
	rec := httptest.NewRecorder()
	switch typ := m.Headers().Get(events.HeaderType); {
	case id == "":
		s.writeError(rec, nil, fail(http.StatusBadRequest, "", events.HeaderID, "a durable submission needs a ce-id"))
	case typ != SubmitType:
		s.writeError(rec, nil, fail(http.StatusBadRequest, "", events.HeaderType, fmt.Sprintf("want %s, got %q", SubmitType, typ)))
	default:
		// The body is decoded once: the namespace check and the submit
		// route read the same objects.
		objs, derr := api.Decode(m.Data())
		if err := sameNamespace(m.Subject(), ns, objs); err != nil {
			s.writeError(rec, nil, err)
			break
		}
		req, _ := http.NewRequest("POST", "/v1/workloads", bytes.NewReader(m.Data()))
		req.Header.Set("Idempotency-Key", id)
		ctx := context.WithValue(auth.WithUser(req.Context(), submitterOf(ns)), decodedKey{}, &decoded{data: m.Data(), objs: objs, err: derr})
		h.ServeHTTP(rec, req.WithContext(ctx))
	}
	if rec.Code >= 500 {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if rec.Code >= 400 && id != "" {
		rej := nats.NewMsg(RejectedSubject(ns, id))
		rej.Header.Set(events.HeaderSpecVersion, "1.0")
		rej.Header.Set(events.HeaderID, id+"/rejected")
		rej.Header.Set(events.HeaderType, RejectedType)
		rej.Header.Set(events.HeaderSource, "jetqueue/ingest")
		rej.Header.Set(events.HeaderTime, s.cfg.Now().UTC().Format(time.RFC3339Nano))
		rej.Header.Set("Status", strconv.Itoa(rec.Code))
		rej.Data = rec.Body.Bytes()
		if err := nc.PublishMsg(rej); err != nil {
			s.log.Warn("rejection not published", zap.String("ce-id", id), zap.Error(err))
		}
	}
	_ = m.Ack()
}

// sameNamespace refuses a durable submission with a document of another
// namespace than its subject's. The NATS server lets a namespace's
// submitters publish only on jq.submit.<namespace>.>, so the subject is
// the one thing about the sender it vouches for (JetStream keeps no
// Nats-Request-Info); the documents must stay inside it. What does not
// decode is left to the handler, which rejects it with its usual errors.
func sameNamespace(subject, ns string, objs []api.Object) error {
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		if m.GetNamespace() != ns {
			return fail(http.StatusForbidden, api.ObjectRef(o), "metadata.namespace",
				fmt.Sprintf("published on %s, which takes submissions to namespace %q only", subject, ns))
		}
	}
	return nil
}

// submitterOf is who a durable submission acts as. Its authority is the
// NATS server's: the sender could publish on its namespace's subject, and
// sameNamespace keeps every document there, on the one route it takes
// (POST /v1/workloads). So it acts as jetqueue's own in-process callers
// do, in system:masters, under a name that says where it came from.
func submitterOf(ns string) auth.User {
	return auth.User{Name: "system:jetqueue:submit:" + ns, Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}
}
