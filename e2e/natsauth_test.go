package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/embedded"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/natsconf"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
)

// shippedNATSConfig is the NATS configuration compose and Kubernetes run.
const shippedNATSConfig = "../deploy/nats/jetqueue.conf"

// securedWorld: one 9-CPU queue, a LocalQueue in each team's namespace.
const securedWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "9"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq}
`

// securedPolicy: each team's NATS user (nats:<account>:<user>) may use
// its own namespace, and its durable submitter create workloads there; an
// unauthenticated HTTP caller (the test itself, under --anonymous) is the
// administrator, so that the NATS identity is the one thing a request
// from a team's connection could be told apart by.
const securedPolicy = `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
subjects: [{kind: User, name: "nats:NS_TEAM_A:team-a"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-b, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
subjects: [{kind: User, name: "nats:NS_TEAM_B:team-b"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a-submitter, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jetqueue-submitter}
subjects: [{kind: User, name: "system:jetqueue:submit:team-a"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-b-submitter, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jetqueue-submitter}
subjects: [{kind: User, name: "system:jetqueue:submit:team-b"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: anonymous-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
subjects: [{kind: Group, name: system:unauthenticated}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: anonymous-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jetqueue-admin}
subjects: [{kind: Group, name: system:unauthenticated}]
`

// secured is a system on a NATS server running the shipped accounts, each
// service connected as its own user.
type secured struct {
	*system
	url string // the server, without credentials
	ids map[string]bus.Identity
}

// startSecured starts NATS from deploy/nats/jetqueue.conf (its passwords
// from the environment, as compose and Kubernetes give them) and the
// services as their users. The system's own probes (scan, withJS) connect
// as admission, a service user.
func startSecured(t *testing.T) *secured { return startSecuredWith(t, "", "") }

// startSecuredWith is startSecured with more of the policy (policy,
// RBAC YAML appended to the shipped roles and securedPolicy) and HTTP
// users (tokens, kube-apiserver's static token CSV): a request with one
// of the tokens acts as its user, one without acts as the anonymous
// administrator.
func startSecuredWith(t testing.TB, policy, tokens string) *secured {
	t.Helper()
	s := startShippedNATS(t)
	ids := s.ids
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	roles, err := os.ReadFile("../deploy/auth/roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyFile, append(append(roles, "\n---\n"...), securedPolicy+"\n---\n"+policy...), 0o600); err != nil {
		t.Fatal(err)
	}
	authOpts := auth.Options{Anonymous: true, AuthorizationPolicyFile: policyFile}
	if tokens != "" {
		authOpts.TokenAuthFile = filepath.Join(t.TempDir(), "tokens.csv")
		if err := os.WriteFile(authOpts.TokenAuthFile, []byte(tokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	member := func(svc string) bus.Member {
		return bus.Member{NATSURL: s.url, Identity: ids[svc], Shard: svc + "-0", Instance: "a", LeaseTTL: 2 * time.Second}
	}
	s.run("admission", func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, admission.Config{Member: member("admission")})
	})
	s.run("preemptor", func(ctx context.Context, rt *service.Runtime) error {
		return preemptor.Run(ctx, rt, preemptor.Config{Member: member("preemptor")})
	})
	s.run("podsready", func(ctx context.Context, rt *service.Runtime) error {
		return podsready.Run(ctx, rt, podsready.Config{Member: member("podsready")})
	})
	addr := make(chan string, 1)
	s.run("ingest", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.url, NATS: ids["ingest"], DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0",
			Auth: authOpts, Listening: func(a string) { addr <- a }})
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-time.After(2 * time.Minute):
		t.Fatal("ingest did not start")
	}
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(securedWorld))
	return s
}

// startShippedNATS starts NATS from deploy/nats/jetqueue.conf with a
// fresh password for every user (from the environment, as compose and
// Kubernetes give them) and no service yet; the system's probes connect
// as admission.
func startShippedNATS(t testing.TB) *secured {
	t.Helper()
	ids := map[string]bus.Identity{}
	users := append(append(append([]string{}, natsconf.Services...), natsconf.NodesUser), natsconf.ShippedNamespaces...)
	for _, u := range users {
		pw := "pw-" + u + "-" + fmt.Sprint(time.Now().UnixNano())
		t.Setenv(natsconf.PasswordEnv(u), pw)
		ids[u] = bus.Identity{User: u, Password: pw}
	}
	srv, err := embedded.StartNATSFrom(t.TempDir(), shippedNATSConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	probe, _ := url.Parse(srv.ClientURL())
	probe.User = url.UserPassword("admission", ids["admission"].Password)
	s := &secured{system: &system{t: t, nats: probe.String(), db: testenv.Postgres(t)}, url: srv.ClientURL(), ids: ids}
	t.Cleanup(s.close)
	return s
}

// conn connects as user, collecting the errors the server sends it
// asynchronously (a refused publish or subscription).
func (s *secured) conn(user string) (*nats.Conn, <-chan error) {
	s.t.Helper()
	errs := make(chan error, 64)
	opts, err := s.ids[user].Options()
	if err != nil {
		s.t.Fatal(err)
	}
	nc, err := bus.Connect(s.url, user, append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	return nc, errs
}

// refused waits for the server to refuse something on subject.
func refused(t *testing.T, errs <-chan error, subject string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-timeout:
			t.Fatalf("no permissions violation for %s", subject)
		}
	}
}

// eventCount is the number of events in JQ_EVENTS, read to its last
// sequence, and how many of them a consumer refuses to apply.
func (s *secured) eventCount() (all, refused int) {
	s.t.Helper()
	s.scanWith(func(events.Event) { all++ }, func(uint64, error) { all++; refused++ })
	return all, refused
}

func teamWorkload(ns, name, cpu string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q}}}]}}}]}}`, name, ns, cpu)
}

func (s *secured) statusOf(ns, name string) string {
	s.t.Helper()
	for _, v := range s.workloads() {
		if v.Namespace == ns && v.Name == name {
			return v.Status
		}
	}
	return ""
}

// TestNATSRefusesAnonymousAndWrongPasswords: the shipped configuration
// has no anonymous user.
func TestNATSRefusesAnonymousAndWrongPasswords(t *testing.T) {
	s := startSecured(t)
	if nc, err := nats.Connect(s.url); err == nil {
		nc.Close()
		t.Fatal("an anonymous connection was accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous: %v, want an authorization violation", err)
	}
	if nc, err := (bus.Identity{User: "admission", Password: "guess"}).Dial(s.url, "guess"); err == nil {
		nc.Close()
		t.Fatal("a wrong password was accepted")
	}
}

// TestNATSSubmitterCannotWriteTheLogOrTheBuckets: a submitter's
// connection can publish no event, write no lease and move no clock; the
// log is exactly as long afterwards and admission still holds its lease.
func TestNATSSubmitterCannotWriteTheLogOrTheBuckets(t *testing.T) {
	s := startSecured(t)
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-a", "big", "100"))
	s.sync()
	before, _ := s.eventCount()
	leaseBefore := s.leaseHolder("admission-0")

	nc, errs := s.conn("team-a")
	forged := events.Event{ID: "forged-1", Type: events.QuotaReserved, Source: events.SourceAdmission, Time: clock0,
		Subject: events.WorkloadSubject("team-a", "big"),
		Data: &events.QuotaReservedData{WorkloadRef: events.WorkloadRef{Namespace: "team-a", Name: "big"},
			Admission: scheduler.Admission{ClusterQueue: "cq"}}}
	msg := nats.NewMsg(forged.Subject)
	for k, v := range forged.Headers() {
		msg.Header.Set(k, v)
	}
	msg.Data, _ = forged.Body()
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	refused(t, errs, forged.Subject)

	if err := nc.Publish("$KV."+bus.LeaseBucket+".admission-0", []byte("team-a")); err != nil {
		t.Fatal(err)
	}
	refused(t, errs, "$KV."+bus.LeaseBucket+".admission-0")
	if err := nc.Publish("$KV.JQ_CLOCK.now", []byte(`"2999-01-01T00:00:00Z"`)); err != nil {
		t.Fatal(err)
	}
	refused(t, errs, "$KV.JQ_CLOCK.now")
	// The JetStream API of jetqueue's account is not the submitter's
	// either: its own account has no JetStream at all.
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.KeyValue(ctx, bus.LeaseBucket); err == nil {
		t.Error("a submitter opened " + bus.LeaseBucket)
	}

	s.sync()
	if got, _ := s.eventCount(); got != before {
		t.Errorf("JQ_EVENTS holds %d events, %d before the forgeries", got, before)
	}
	if got := s.leaseHolder("admission-0"); got != leaseBefore {
		t.Errorf("admission-0 is held by %q, was %q", got, leaseBefore)
	}
	if st := s.statusOf("team-a", "big"); st != "pending" {
		t.Errorf("big is %q, want pending", st)
	}
}

// TestForgedDecisionFromAnotherServiceChangesNothing: a service's
// credentials may publish on jq.ev.>, but a QuotaReserved under any
// source but admission's is skipped by every consumer: the 100-CPU
// workload stays pending in a 9-CPU queue and nothing follows the forgery
// in the log.
func TestForgedDecisionFromAnotherServiceChangesNothing(t *testing.T) {
	s := startSecured(t)
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-a", "big", "100"))
	s.sync()
	before, _ := s.eventCount()
	nc, _ := s.conn("scorer")
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forged := events.Event{ID: "forged-by-scorer", Type: events.QuotaReserved, Source: events.SourceScorer, Time: clock0,
		Subject: events.WorkloadSubject("team-a", "big"),
		Data: &events.QuotaReservedData{WorkloadRef: events.WorkloadRef{Namespace: "team-a", Name: "big"},
			Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
				Flavors: map[corev1.ResourceName]string{"cpu": "rf"}, Usage: map[corev1.ResourceName]int64{"cpu": 1}}}}}}
	if _, _, err := bus.Publish(ctx, js, forged, nil); err != nil {
		t.Fatal(err)
	}
	s.sync()
	if got, refused := s.eventCount(); got != before+1 || refused != 1 {
		t.Errorf("JQ_EVENTS holds %d events (%d refused), want %d: the forgery, refused, and nothing after it", got, refused, before+1)
	}
	if st := s.statusOf("team-a", "big"); st != "pending" {
		t.Errorf("big is %q after a forged QuotaReserved, want pending", st)
	}
	// A workload that fits is still admitted: the queue's usage was not
	// charged with the forgery either.
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-a", "fits", "9"))
	s.sync()
	if st := s.statusOf("team-a", "fits"); st != "admitted" {
		t.Errorf("fits is %q, want admitted", st)
	}
}

// TestNATSSubmittersStayInTheirNamespace: team-a may submit durably to
// team-a only, a team-a subject carrying a team-b document is rejected,
// and team-a cannot read team-b's rejections.
func TestNATSSubmittersStayInTheirNamespace(t *testing.T) {
	s := startSecured(t)
	nc, errs := s.conn("team-a")
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	submit := func(subject, id string, body []byte) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Header.Set(events.HeaderSpecVersion, "1.0")
		m.Header.Set(events.HeaderID, id)
		m.Header.Set(events.HeaderType, ingest.SubmitType)
		m.Header.Set(events.HeaderSource, "team-a")
		m.Data = body
		return m
	}
	rejected, err := nc.SubscribeSync(ingest.RejectedSubject("team-a", "smuggled"))
	if err != nil {
		t.Fatal(err)
	}
	// Another team's subject: the server refuses the publish.
	if err := nc.PublishMsg(submit(ingest.SubmitSubjectOf("team-b", "x"), "other", teamWorkload("team-b", "other", "1"))); err != nil {
		t.Fatal(err)
	}
	refused(t, errs, "jq.submit.team-b.")
	// Its own subject, another team's document: ingest rejects it.
	if _, err := js.PublishMsg(ctx, submit(ingest.SubmitSubjectOf("team-a", "x"), "smuggled", teamWorkload("team-b", "smuggled", "1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, submit(ingest.SubmitSubjectOf("team-a", "y"), "own", teamWorkload("team-a", "own", "1"))); err != nil {
		t.Fatal(err)
	}
	msg, err := rejected.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	if msg.Header.Get("Status") != "403" || !strings.Contains(string(msg.Data), "metadata.namespace") {
		t.Errorf("rejection: %s %s, want 403 on metadata.namespace", msg.Header.Get("Status"), msg.Data)
	}
	testenv.Eventually(t, "team-a's own submission in the log", 15*time.Second, func() error {
		if s.eventsPerWorkload(events.WorkloadSubmitted)["team-a/own"] != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	s.sync()
	subs := s.eventsPerWorkload(events.WorkloadSubmitted)
	if subs["team-b/smuggled"] != 0 || subs["team-b/other"] != 0 {
		t.Errorf("submissions in the log %v: nothing of team-b's may come from team-a", subs)
	}
	// team-b's rejections are not team-a's to read.
	if _, err := nc.SubscribeSync("jq.rejected.team-b.>"); err != nil {
		t.Fatal(err)
	}
	refused(t, errs, "jq.rejected.team-b.>")
}

// TestNATSRequestsActAsTheirSender: a request/reply call acts as the
// connection's user, which the server stamps (replacing a forged
// Nats-Request-Info), and RBAC applies as over HTTP: team-a finishes its
// own workload but not team-b's.
func TestNATSRequestsActAsTheirSender(t *testing.T) {
	s := startSecured(t)
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-a", "mine", "1"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-b", "theirs", "1"))
	s.sync()
	nc, _ := s.conn("team-a")
	ask := func(body string, forge bool) (int, string) { return s.ask(t, nc, ingest.SubjectFinish, body, forge) }
	if code, body := ask(`{"namespace":"team-b","name":"theirs","succeeded":true}`, false); code != http.StatusForbidden || !strings.Contains(body, "team-a") {
		t.Errorf("team-a finishing team-b's workload: %d %s, want 403 naming team-a", code, body)
	}
	if code, body := ask(`{"namespace":"team-b","name":"theirs","succeeded":true}`, true); code != http.StatusForbidden || !strings.Contains(body, "team-a") {
		t.Errorf("team-a claiming to be team-b: %d %s, want 403 naming team-a", code, body)
	}
	// The other reproductions over request/reply: a ClusterQueue
	// with quota 0, and every other action on team-b's workload.
	before, _ := s.eventCount()
	for _, tc := range []struct{ subject, body string }{
		{ingest.SubjectApply, zeroQuotaCQ},
		{ingest.SubjectDelete, `{"namespace":"team-b","name":"theirs"}`},
		{ingest.SubjectPriority, `{"namespace":"team-b","name":"theirs","priority":1000}`},
		{ingest.SubjectPodsReady, `{"namespace":"team-b","name":"theirs"}`},
	} {
		if code, body := s.ask(t, nc, tc.subject, tc.body, false); code != http.StatusForbidden || !strings.Contains(body, `user \"nats:NS_TEAM_A:team-a\"`) {
			t.Errorf("team-a on %s: %d %s, want 403 naming team-a", tc.subject, code, body)
		}
	}
	if after, _ := s.eventCount(); after != before {
		t.Errorf("refused requests published %d events", after-before)
	}
	if code, body := ask(`{"namespace":"team-a","name":"mine","succeeded":true}`, false); code != http.StatusAccepted {
		t.Errorf("team-a finishing its own workload: %d %s", code, body)
	}
	s.sync()
	if st := s.statusOf("team-b", "theirs"); st != "pending" && st != "admitted" {
		t.Errorf("team-b's workload is %q after team-a's refused requests", st)
	}
}

// zeroQuotaCQ is a ClusterQueue with no quota at all.
const zeroQuotaCQ = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},` +
	`"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"0"}]}]}]}}`

// ask sends a request over NATS as nc's user, with a forged
// Nats-Request-Info naming team-b if forge, and returns the answer.
func (s *secured) ask(t *testing.T, nc *nats.Conn, subject, body string, forge bool) (int, string) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if forge {
		m.Header.Set(natsconf.RequestInfoHeader, `{"acc":"NS_TEAM_B","user":"team-b"}`)
	}
	reply, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var code int
	fmt.Sscan(reply.Header.Get("Status"), &code)
	return code, string(reply.Data)
}
