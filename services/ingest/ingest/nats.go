package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// natsUser is the identity of a NATS requester: nats:<account>:<user>
// (the user a JWT user's name, else its user name or nkey), in group
// nats:<account>, so that a policy can bind one user or a whole account
// (for example a namespace's account, NS_TEAM_A). The prefix keeps NATS
// users apart from HTTP users: NATS user names are chosen by whoever
// writes the NATS configuration, and a NATS user "alice" must not get the
// bindings of the HTTP user alice, nor a NATS user named
// "system:jetqueue:submit:team-a" those of a durable submitter.
func natsUser(r natsconf.Requester) auth.User {
	name := r.User
	if r.Name != "" {
		name = r.Name
	}
	return auth.User{Name: NATSUserName(r.Account, name), UID: "nats:" + r.Account + ":" + r.User,
		Groups: []string{NATSGroup(r.Account), auth.GroupAuthenticated}}
}

// NATSUserName is the RBAC user name of NATS user name of account.
func NATSUserName(account, name string) string { return "nats:" + account + ":" + name }

// NATSGroup is the RBAC group of every NATS user of account.
func NATSGroup(account string) string { return "nats:" + account }

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

// SubmitLimits bound the submissions waiting in JQ_SUBMIT, in all and
// per namespace.
type SubmitLimits struct {
	MaxMsgs, MaxBytes int64
	// MaxMsgsPerNamespace bounds one namespace's waiting submissions; 0
	// means DefaultSubmitLimits'. It is what keeps one namespace from
	// filling the stream that every namespace shares (ensureSubmissions).
	MaxMsgsPerNamespace int64
	// MaxMsgSize is the largest submission, headers included; 0 means
	// DefaultSubmitLimits'. A durable submission is one Workload or Job.
	MaxMsgSize int64
}

// DefaultSubmitLimits are the flags' defaults: a million submissions or
// 1 GiB in all, whichever comes first; 1,000 submissions of at most
// 256 KiB per namespace. One namespace thus holds at most 250 MiB, a
// quarter of the stream: it takes four namespaces flooding with the
// largest submissions to fill it (TestDefaultSubmitLimitsShareTheStream).
var DefaultSubmitLimits = SubmitLimits{MaxMsgs: 1_000_000, MaxBytes: 1 << 30, MaxMsgsPerNamespace: 1000, MaxMsgSize: 256 << 10}

// withDefaults fills the per-namespace bounds a struct literal left zero.
func (l SubmitLimits) withDefaults() SubmitLimits {
	if l.MaxMsgsPerNamespace == 0 {
		l.MaxMsgsPerNamespace = DefaultSubmitLimits.MaxMsgsPerNamespace
	}
	if l.MaxMsgSize == 0 {
		l.MaxMsgSize = DefaultSubmitLimits.MaxMsgSize
	}
	return l
}

// Validate refuses a limit that is not positive, naming its flag.
func (l SubmitLimits) Validate() error {
	if l.MaxMsgs <= 0 {
		return fmt.Errorf("--submit-max-msgs %d: must be positive", l.MaxMsgs)
	}
	if l.MaxBytes <= 0 {
		return fmt.Errorf("--submit-max-bytes %d: must be positive", l.MaxBytes)
	}
	if l.MaxMsgsPerNamespace < 0 {
		return fmt.Errorf("--submit-max-msgs-per-namespace %d: must be positive (0: the default)", l.MaxMsgsPerNamespace)
	}
	if l.MaxMsgSize < 0 || l.MaxMsgSize > math.MaxInt32 {
		return fmt.Errorf("--submit-max-msg-size %d: must be positive (0: the default) and at most %d", l.MaxMsgSize, math.MaxInt32)
	}
	return nil
}

// submitSubjects are what JQ_SUBMIT takes: jq.submit.<namespace> and
// jq.submit.<namespace>.<token>. submitTransform stores the second as the
// first, so that every submission of a namespace is stored on one
// subject, jq.submit.<namespace>, whatever token its publisher chose.
// That is what makes JetStream's per-subject limit a per-namespace limit:
// MaxMsgsPerSubject counts per exact subject, and on the subjects as
// published (jq.submit.<namespace>.<any token>) a namespace could spread
// over as many subjects as it likes. A deeper subject
// (jq.submit.a.b.c) matches no stream: its JetStream publish is answered
// "no responders", never stored past the limit. A transform cannot drop
// a trailing ">" (the server requires one on both sides), hence the two
// fixed-depth subjects.
var (
	submitSubjects  = []string{"jq.submit.*", "jq.submit.*.*"}
	submitTransform = &jetstream.SubjectTransformConfig{Source: "jq.submit.*.*", Destination: "jq.submit.{{wildcard(1)}}"}
)

// submitStreamConfig is JQ_SUBMIT's configuration under lim.
//
// Why these limits, and not others: JQ_SUBMIT lives in jetqueue's account,
// and a namespace's submitters publish into it through a service import
// (libs/natsconf), so the NATS account limits of a namespace's account
// (its jetstream { max_file ... }) bound nothing here: that account has
// no JetStream, and the bytes are jetqueue's. A stream per namespace
// would need ingest to know every namespace before its first submission.
// So the one stream bounds each namespace itself:
//   - MaxMsgSize refuses an oversized submission at the door, before it
//     is written (a flood of 1 MB bodies was the issue's);
//   - MaxMsgsPerSubject over the transformed subject bounds each
//     namespace's waiting submissions, and with MaxMsgSize its bytes;
//   - DiscardNew and DiscardNewPerSubject refuse the publish that would
//     pass a limit, never drop one JetStream acknowledged.
//
// Each refusal is the publisher's JetStream error (10077 "maximum
// messages per subject exceeded", 10054 "message size exceeds maximum
// allowed"): NATS' 503, to retry once ingest has drained the stream. It
// reaches only the namespace that is over its limit.
func submitStreamConfig(lim SubmitLimits, replicas int) jetstream.StreamConfig {
	lim = lim.withDefaults()
	return jetstream.StreamConfig{Name: SubmitStream, Subjects: submitSubjects, SubjectTransform: submitTransform,
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 10 * time.Minute,
		MaxMsgs: lim.MaxMsgs, MaxBytes: lim.MaxBytes, MaxMsgSize: int32(lim.MaxMsgSize),
		MaxMsgsPerSubject: lim.MaxMsgsPerNamespace, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
		Replicas: replicas}
}

// The JetStream errors a durable submitter's publish may get from
// JQ_SUBMIT's limits (submitStreamConfig).
const (
	// CodeSubmitFull: the stream, or the namespace's share of it, is
	// full. Retry later, as after an HTTP 503.
	CodeSubmitFull jetstream.ErrorCode = 10077
	// CodeSubmitTooLarge: the submission is larger than
	// --submit-max-msg-size. Retrying it will not help.
	CodeSubmitTooLarge jetstream.ErrorCode = 10054
)

// SubmitRefusedRetryable tells whether err is JQ_SUBMIT refusing a
// publish because it (or the publisher's namespace's share) is full.
func SubmitRefusedRetryable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == CodeSubmitFull
}

// ensureSubmissions declares JQ_SUBMIT and ingest's consumer on it. Ingest
// does so before it reports ready, so that a submitter who waited for it
// never publishes to a stream that does not exist yet.
//
// JQ_SUBMIT is a work queue: a submission leaves it once ingest has
// handled it (accepted into JQ_EVENTS, or rejected). What waits is
// bounded by lim, in all and per namespace (submitStreamConfig); a full
// stream refuses new publishes (DiscardNew), so the publisher is told its
// submission was not taken, and nothing JetStream acknowledged is ever
// dropped to make room.
func ensureSubmissions(ctx context.Context, js jetstream.JetStream, lim SubmitLimits) (jetstream.Consumer, error) {
	st, err := bus.Ensure(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		r, err := bus.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateStream(ctx, submitStreamConfig(lim, r))
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

// GroupSubmitters holds every namespace's durable submitter
// (submitterOf), as Kubernetes' system:serviceaccounts holds every
// service account: a policy may bind them all at once.
const GroupSubmitters = "system:jetqueue:submitters"

// SubmitterName is the user a durable submission to namespace acts as.
func SubmitterName(namespace string) string { return "system:jetqueue:submit:" + namespace }

// submitterOf is who a durable submission acts as: the namespace's
// submitter, an identity of its own that the RBAC policy grants or not,
// as it grants any user. Its authority to speak for the namespace is the
// NATS server's (the sender could publish on the namespace's subject),
// and sameNamespace keeps every document there; what it may do there is
// the policy's, so tightening a namespace's bindings closes its durable
// door too, and a durable submitter gets no privilege (spec.priority, say)
// that the policy does not give it. The shipped policies bind it to
// jetqueue-submitter in its namespace (deploy/auth).
func submitterOf(ns string) auth.User {
	return auth.User{Name: SubmitterName(ns), Groups: []string{GroupSubmitters, auth.GroupAuthenticated}}
}
