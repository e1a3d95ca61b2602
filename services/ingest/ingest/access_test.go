package ingest

import (
	"context"
	"encoding/json"
	"io"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// Users of the access tests, by token. The groups bind them through
// deploy/auth/policy.yaml (team-a, team-b: batch-user in their
// namespace; auditors: batch-viewer; ops: batch-admin and jetqueue-admin)
// and the bindings below (queue-admins: batch-admin only; fred: may edit
// ResourceFlavors only).
const accessTokens = `alice-token,alice,uid-alice,"team-a"
bob-token,bob,uid-bob,team-b
vera-token,vera,uid-vera,auditors
olga-token,olga,uid-olga,ops
adam-token,adam,uid-adam,queue-admins
fred-token,fred,uid-fred,
nobody-token,nobody,uid-nobody,
`

const accessBindings = `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: queue-admins}
subjects: [{kind: Group, name: queue-admins}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flavor-editor}
rules: [{apiGroups: [kueue.x-k8s.io], resources: [resourceflavors], verbs: [create, update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fred}
subjects: [{kind: User, name: fred}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flavor-editor}
`

// guarded is a front door behind the shipped policy, served over HTTP
// with authentication in front, as Run serves it.
type guarded struct {
	*frontDoor
	url string
}

func newGuarded(t *testing.T, anonymous bool, withPolicy bool) *guarded {
	t.Helper()
	f := newFrontDoor(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(accessTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := auth.Options{TokenAuthFile: tokens, Anonymous: anonymous}
	if withPolicy {
		shipped, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "policy.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		opts.AuthorizationPolicyFile = filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(opts.AuthorizationPolicyFile, append(shipped, accessBindings...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g, err := NewGuard(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.guard = g
	// No projector runs here: a rebuild request is answered at once.
	go func() {
		for done := range f.rebuild {
			done <- nil
		}
	}()
	srv := httptest.NewServer(f.authenticate(f.routes()))
	t.Cleanup(srv.Close)
	return &guarded{frontDoor: f, url: srv.URL}
}

// call sends a request with a bearer token ("" for none).
func (g *guarded) call(t *testing.T, token, method, path, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func nsWorkload(ns, name string) string {
	return strings.Replace(workload(name, "1"), `"namespace":"ns"`, `"namespace":"`+ns+`"`, 1)
}

func nsJob(ns, name string) string {
	return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"` + name + `","namespace":"` + ns + `","labels":{"kueue.x-k8s.io/queue-name":"lq"}},` +
		`"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"1"}}}]}}}}`
}

// forbidden is the 403 body's message: a metav1.Status' under /apis/
// (Kubernetes-style APIs), else the one error's.
func forbidden(t *testing.T, body string) string {
	t.Helper()
	var st metav1.Status
	if json.Unmarshal([]byte(body), &st) == nil && st.Kind == "Status" {
		if st.Reason != metav1.StatusReasonForbidden || st.Code != 403 {
			t.Fatalf("want a Forbidden Status, got %s", body)
		}
		return st.Message
	}
	var out errorBody
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Errors) != 1 {
		t.Fatalf("want one error, got %s", body)
	}
	return out.Errors[0].Message
}

// TestEachRoleOverHTTP: what each shipped role may and may not do, through
// the real HTTP server; a refusal is 403 with Kubernetes' wording and
// publishes nothing.
func TestEachRoleOverHTTP(t *testing.T) {
	g := newGuarded(t, false, true)
	for _, setup := range []struct{ ns, name string }{{"team-a", "wa"}, {"team-b", "wb"}} {
		if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", nsWorkload(setup.ns, setup.name)); code != http.StatusAccepted {
			t.Fatalf("batch-admin submits in %s: %d %s", setup.ns, code, body)
		}
	}
	for _, tc := range []struct {
		name, token, method, path, body string
		want                            int
		message                         string
	}{
		{"batch-user submits in its namespace", "alice-token", "POST", "/v1/workloads", nsWorkload("team-a", "a1"), http.StatusAccepted, ""},
		{"batch-user submits a Job in its namespace", "alice-token", "POST", "/v1/workloads", nsJob("team-a", "j1"), http.StatusAccepted, ""},
		{"batch-user finishes in its namespace", "alice-token", "POST", "/v1/workloads/team-a/wa/finish", "", http.StatusAccepted, ""},
		{"batch-user marks podsready in its namespace", "alice-token", "POST", "/v1/workloads/team-a/wa/podsready", "", http.StatusAccepted, ""},
		{"batch-user submits in another namespace", "alice-token", "POST", "/v1/workloads", nsWorkload("team-b", "a2"), http.StatusForbidden,
			`user "alice" cannot create resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user submits a Job in another namespace", "bob-token", "POST", "/v1/workloads", nsJob("team-a", "j2"), http.StatusForbidden,
			`user "bob" cannot create resource "jobs" in API group "batch" in the namespace "team-a"`},
		{"batch-user finishes in another namespace", "bob-token", "POST", "/v1/workloads/team-a/wa/finish", "", http.StatusForbidden,
			`user "bob" cannot create resource "workloads/finish" in API group "kueue.x-k8s.io" in the namespace "team-a"`},
		{"batch-user deletes in another namespace", "alice-token", "DELETE", "/v1/workloads/team-b/wb", "", http.StatusForbidden,
			`user "alice" cannot delete resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user stops its workload", "alice-token", "POST", "/v1/workloads/team-a/wa/active", `{"active":false}`, http.StatusForbidden,
			`user "alice" cannot update resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-a"`},
		{"batch-admin stops a workload", "adam-token", "POST", "/v1/workloads/team-b/wb/active", `{"active":false}`, http.StatusAccepted, ""},
		{"batch-user reprioritises", "alice-token", "POST", "/v1/workloads/team-a/wa/priority", `{"priority":100}`, http.StatusForbidden,
			`user "alice" cannot create resource "workloads/priority" in API group "kueue.x-k8s.io" in the namespace "team-a"`},
		{"batch-user applies a ClusterQueue", "alice-token", "POST", "/v1/apply", cq("4"), http.StatusForbidden,
			`user "alice" cannot create resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"batch-user deletes a ClusterQueue", "alice-token", "DELETE", "/v1/clusterqueues/cq-b", "", http.StatusForbidden,
			`user "alice" cannot delete resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"batch-user lists ClusterQueues", "alice-token", "GET", "/v1/clusterqueues", "", http.StatusForbidden,
			`user "alice" cannot list resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"batch-user reads another namespace's workload", "alice-token", "GET", "/v1/workloads/team-b/wb", "", http.StatusForbidden,
			`user "alice" cannot get resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user explains another namespace's workload", "alice-token", "GET", "/v1/workloads/team-b/wb/explain", "", http.StatusForbidden,
			`user "alice" cannot get resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user reads a ClusterQueue's pending list", "alice-token", "GET", "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq-b/pendingworkloads", "", http.StatusForbidden,
			`user "alice" cannot get resource "clusterqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" at the cluster scope`},
		{"batch-user reads another namespace's LocalQueue", "alice-token", "GET", "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/lq/pendingworkloads", "", http.StatusForbidden,
			`user "alice" cannot get resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user rebuilds the projection", "alice-token", "POST", "/v1/projection/rebuild", "", http.StatusForbidden,
			`user "alice" cannot post path "/v1/projection/rebuild"`},
		{"any identified user syncs", "nobody-token", "GET", "/v1/sync?timeout=1ms", "", http.StatusGatewayTimeout, ""},
		{"viewer submits", "vera-token", "POST", "/v1/workloads", nsWorkload("team-a", "v1"), http.StatusForbidden,
			`user "vera" cannot create resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-a"`},
		{"viewer finishes", "vera-token", "POST", "/v1/workloads/team-a/wa/finish", "", http.StatusForbidden,
			`user "vera" cannot create resource "workloads/finish" in API group "kueue.x-k8s.io" in the namespace "team-a"`},
		{"viewer lists ClusterQueues", "vera-token", "GET", "/v1/clusterqueues", "", http.StatusOK, ""},
		{"batch-admin reprioritises anywhere", "adam-token", "POST", "/v1/workloads/team-b/wb/priority", `{"priority":100}`, http.StatusAccepted, ""},
		{"batch-admin applies", "adam-token", "POST", "/v1/apply", list(cqA, cq("4")), http.StatusOK, ""},
		{"batch-admin without jetqueue-admin rebuilds", "adam-token", "POST", "/v1/projection/rebuild", "", http.StatusForbidden,
			`user "adam" cannot post path "/v1/projection/rebuild"`},
		{"jetqueue-admin rebuilds", "olga-token", "POST", "/v1/projection/rebuild", "", http.StatusAccepted, ""},
		{"no clock endpoint without --manual-clock", "olga-token", "POST", "/v1/debug/clock/advance", `{"duration":"1m"}`, http.StatusNotFound, ""},
		{"apply checks every document", "fred-token", "POST", "/v1/apply", list(cqA, cq("8")), http.StatusForbidden,
			`user "fred" cannot create resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"batch-user reads another namespace's Workload object", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/workloads/wb", "", http.StatusForbidden,
			`Workload/team-b/wb: user "alice" cannot get resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user lists another namespace's Workload objects", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/workloads", "", http.StatusForbidden,
			`user "alice" cannot list resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user watches another namespace's Workload objects", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/workloads?watch=true", "", http.StatusForbidden,
			`user "alice" cannot watch resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{"batch-user lists ClusterQueue objects", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "", http.StatusForbidden,
			`user "alice" cannot list resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"batch-user reads the Configuration", "alice-token", "GET", "/apis/config.kueue.x-k8s.io/v1beta1/configurations/default", "", http.StatusForbidden,
			`Configuration/default: user "alice" cannot get resource "configurations" in API group "config.kueue.x-k8s.io" at the cluster scope`},
		{"batch-user lists its LocalQueues", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues", "", http.StatusOK, ""},
		{"batch-user watches its Workload objects", "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true&timeoutSeconds=1", "", http.StatusOK, ""},
		{"a user who may list workloads nowhere lists them", "nobody-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/workloads", "", http.StatusForbidden,
			`user "nobody" cannot list resource "workloads" in API group "kueue.x-k8s.io" at the cluster scope`},
		{"viewer lists ClusterQueue objects", "vera-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "", http.StatusOK, ""},
		{"viewer reads PriorityClasses", "vera-token", "GET", "/apis/scheduling.k8s.io/v1/priorityclasses", "", http.StatusOK, ""},
		{"multi-document submit checks every document", "alice-token", "POST", "/v1/workloads", list(nsWorkload("team-a", "m1"), nsWorkload("team-b", "m2")), http.StatusForbidden,
			`user "alice" cannot create resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.messages(t)
			code, _, body := g.call(t, tc.token, tc.method, tc.path, tc.body)
			if code != tc.want {
				t.Fatalf("%s %s as %s: %d %s, want %d", tc.method, tc.path, tc.token, code, body, tc.want)
			}
			if tc.message != "" {
				if got := forbidden(t, body); got != tc.message {
					t.Errorf("message\n got %s\nwant %s", got, tc.message)
				}
			}
			if code == http.StatusForbidden {
				if after := g.messages(t); after != before {
					t.Errorf("a refused request published %d events", after-before)
				}
			}
		})
	}
}

// TestOpeningABatchIsPrivileged: a JQ-Batch header holds the marked
// action's decision back until the rest of the batch arrives, so it needs
// create on workloads/batch (batch-admin has it), beyond the action's own
// permission; refused, nothing is published.
func TestOpeningABatchIsPrivileged(t *testing.T) {
	g := newGuarded(t, false, true)
	if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", nsWorkload("team-a", "wa")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	before := g.messages(t)
	code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads/team-a/wa/podsready", "", "JQ-Batch", "b1/2")
	if code != http.StatusForbidden {
		t.Fatalf("batch-user opening a batch: %d %s, want 403", code, body)
	}
	want := `user "alice" cannot create resource "workloads/batch" in API group "kueue.x-k8s.io" in the namespace "team-a"`
	if got := forbidden(t, body); got != want {
		t.Errorf("message\n got %s\nwant %s", got, want)
	}
	if after := g.messages(t); after != before {
		t.Errorf("a refused request published %d events", after-before)
	}
	if code, _, body := g.call(t, "adam-token", "POST", "/v1/workloads/team-a/wa/podsready", "", "JQ-Batch", "b1/2"); code != http.StatusAccepted {
		t.Errorf("batch-admin opening a batch: %d %s, want 202", code, body)
	}
	if after := g.messages(t); after != before+1 {
		t.Errorf("batch-admin's batched action published %d events, want 1", after-before)
	}
}

// TestWithoutCredentials: no credential, or a wrong one, is 401 with
// WWW-Authenticate on every route; nothing is published.
func TestWithoutCredentials(t *testing.T) {
	g := newGuarded(t, false, true)
	for _, token := range []string{"", "wrong-token", strings.Repeat("x", auth.MaxTokenBytes+1)} {
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/workloads", nsWorkload("team-a", "x")},
			{"GET", "/v1/workloads", ""},
			{"GET", "/v1/sync", ""},
			{"POST", "/v1/projection/rebuild", ""},
		} {
			code, h, body := g.call(t, token, r.method, r.path, r.body)
			if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with token %.10q: %d (WWW-Authenticate %q) %s, want 401", r.method, r.path, token, code, h.Get("WWW-Authenticate"), body)
			}
		}
	}
	if n := g.messages(t); n != 0 {
		t.Errorf("%d events published", n)
	}
}

// TestRequestsWithoutIdentity: a request that reaches the routes with no
// user on its context (the NATS front doors) is 401 unless --anonymous;
// one whose front door put a user there is authorized as that user.
func TestRequestsWithoutIdentity(t *testing.T) {
	g := newGuarded(t, false, true)
	h := g.routes()
	serve := func(ctx context.Context, path, body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "POST", path, strings.NewReader(body)))
		return rec.Code
	}
	if code := serve(t.Context(), "/v1/workloads", nsWorkload("team-a", "n1")); code != http.StatusUnauthorized {
		t.Errorf("no identity: %d, want 401", code)
	}
	alice := auth.WithUser(t.Context(), auth.User{Name: "alice", Groups: []string{"team-a", auth.GroupAuthenticated}})
	if code := serve(alice, "/v1/workloads", nsWorkload("team-a", "n2")); code != http.StatusAccepted {
		t.Errorf("alice in team-a: %d, want 202", code)
	}
	if code := serve(alice, "/v1/workloads", nsWorkload("team-b", "n3")); code != http.StatusForbidden {
		t.Errorf("alice in team-b: %d, want 403", code)
	}
	g.guard.Anonymous = true
	if code := serve(t.Context(), "/v1/workloads", nsWorkload("team-a", "n4")); code != http.StatusForbidden {
		t.Errorf("anonymous under the shipped policy: %d, want 403", code)
	}
}

// TestAnonymousMode: --anonymous without a policy lets anyone do anything
// (the local-experiment mode); with a policy, anonymous requests are
// authorized as system:anonymous.
func TestAnonymousMode(t *testing.T) {
	open := newGuarded(t, true, false)
	if code, _, body := open.call(t, "", "POST", "/v1/workloads", nsWorkload("team-a", "x")); code != http.StatusAccepted {
		t.Errorf("--anonymous, no policy: %d %s, want 202", code, body)
	}
	if code, _, body := open.call(t, "", "POST", "/v1/apply", list(cqA, cq("4"))); code != http.StatusOK {
		t.Errorf("--anonymous, no policy, apply: %d %s, want 200", code, body)
	}
	if code, _, _ := open.call(t, "wrong-token", "GET", "/v1/workloads", ""); code != http.StatusUnauthorized {
		t.Errorf("--anonymous with a wrong token: %d, want 401", code)
	}
	guarded := newGuarded(t, true, true)
	code, _, body := guarded.call(t, "", "POST", "/v1/workloads", nsWorkload("team-a", "x"))
	if code != http.StatusForbidden || forbidden(t, body) != `user "system:anonymous" cannot create resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-a"` {
		t.Errorf("--anonymous with the shipped policy: %d %s, want 403", code, body)
	}
}

// TestListsShowOnlyWhatTheCallerMaySee: a batch-user lists only its own
// namespace's workloads, page by page with honest cursors; a viewer
// bound cluster-wide sees all; someone bound nowhere is refused.
func TestListsShowOnlyWhatTheCallerMaySee(t *testing.T) {
	g := newGuarded(t, false, true)
	for _, w := range []struct{ ns, name string }{{"team-a", "a1"}, {"team-b", "b1"}, {"team-a", "a2"}, {"team-b", "b2"}, {"team-a", "a3"}} {
		if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", nsWorkload(w.ns, w.name)); code != http.StatusAccepted {
			t.Fatalf("%d %s", code, body)
		}
	}
	project(t, g.frontDoor)
	type page struct {
		Items []store.WorkloadView
		Next  string
	}
	listAs := func(token, query string) (int, page) {
		t.Helper()
		code, _, body := g.call(t, token, "GET", "/v1/workloads"+query, "")
		var p page
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
		}
		return code, p
	}
	names := func(p page) []string {
		var out []string
		for _, v := range p.Items {
			out = append(out, v.Namespace+"/"+v.Name)
		}
		return out
	}
	code, p1 := listAs("alice-token", "?limit=2")
	if code != http.StatusOK || !slices.Equal(names(p1), []string{"team-a/a1", "team-a/a2"}) || p1.Next == "" {
		t.Fatalf("alice's first page: %d %v next %q", code, names(p1), p1.Next)
	}
	_, p2 := listAs("alice-token", "?limit=2&after="+p1.Next)
	if !slices.Equal(names(p2), []string{"team-a/a3"}) || p2.Next != "" {
		t.Errorf("alice's second page: %v next %q, want team-a/a3 and no next", names(p2), p2.Next)
	}
	if code, _ := listAs("alice-token", "?namespace=team-b"); code != http.StatusForbidden {
		t.Errorf("alice lists team-b: %d, want 403", code)
	}
	if _, p := listAs("alice-token", "?namespace=team-a"); len(p.Items) != 3 {
		t.Errorf("alice lists team-a: %v", names(p))
	}
	if _, p := listAs("vera-token", ""); len(p.Items) != 5 {
		t.Errorf("the viewer sees %v, want all 5", names(p))
	}
	if code, _ := listAs("nobody-token", ""); code != http.StatusForbidden {
		t.Errorf("a user bound nowhere lists: %d, want 403", code)
	}
}

// project copies the stream into the projection, as the projector would.
func project(t *testing.T, f *frontDoor) {
	t.Helper()
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := f.stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.Record{Seq: seq, Event: ev})
	}
	if _, err := f.store.Apply(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestForbiddenNamesTheObject: a 403 names its object as other errors do.
func TestForbiddenNamesTheObject(t *testing.T) {
	a := rbac.Attributes{Verb: "get", APIGroup: groupKueue, Resource: "workloads", Namespace: "team-b", Name: "w"}
	if got := forbiddenObject(a); got != "Workload/team-b/w" {
		t.Errorf("forbiddenObject = %q", got)
	}
}

// TestCounterfactualsNameOnlyWhatTheCallerMayRead: a counterfactual that
// another namespace's workload finishing would admit names it to a
// caller who may read it, and says "another workload" to one who may not.
func TestCounterfactualsNameOnlyWhatTheCallerMayRead(t *testing.T) {
	g := newGuarded(t, false, true)
	config := teamQueues("c", "1")
	if code, _, body := g.call(t, "olga-token", "POST", "/v1/apply", config, "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	// wa and wb take the cohort's 2 cpu; wb2 waits.
	for _, w := range []struct{ ns, name string }{{"team-a", "wa"}, {"team-b", "wb"}, {"team-b", "wb2"}} {
		if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", nsWorkload(w.ns, w.name)); code != http.StatusAccepted {
			t.Fatalf("submit %s: %d %s", w.name, code, body)
		}
	}
	finishers := func(token string) (string, []string) {
		code, _, body := g.call(t, token, "GET", "/v1/workloads/team-b/wb2/explain?counterfactual=true", "")
		if code != http.StatusOK {
			t.Fatalf("explain as %s: %d %s", token, code, body)
		}
		var ex struct {
			Counterfactuals struct {
				Changes []struct {
					Kind      string
					Workloads []struct {
						Namespace, Name string
						Hidden          bool
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &ex); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range ex.Counterfactuals.Changes {
			if c.Kind != "Finish" {
				continue
			}
			for _, w := range c.Workloads {
				out = append(out, w.Namespace+"/"+w.Name+map[bool]string{true: "(hidden)"}[w.Hidden])
			}
		}
		return body, out
	}
	// Candidates hold the same cpu and priority: key order picks team-a/wa.
	if _, got := finishers("olga-token"); !slices.Equal(got, []string{"team-a/wa"}) {
		t.Errorf("batch-admin sees finishers %v, want [team-a/wa]", got)
	}
	body, got := finishers("bob-token")
	if !slices.Equal(got, []string{"/(hidden)"}) {
		t.Errorf("team-b's user sees finishers %v, want one hidden", got)
	}
	if strings.Contains(body, "team-a") || strings.Contains(body, `"wa"`) {
		t.Errorf("team-b's user learns of team-a's workload: %s", body)
	}
	if !strings.Contains(body, "another workload finished") {
		t.Errorf("message does not say another workload: %s", body)
	}
	// Alice may not read team-b's workloads at all.
	if code, _, _ := g.call(t, "alice-token", "GET", "/v1/workloads/team-b/wb2/explain?counterfactual=true", ""); code != http.StatusForbidden {
		t.Errorf("team-a's user explains team-b's workload: %d", code)
	}
}

// teamQueues is a ResourceFlavor rf and, for team-a and team-b, a
// ClusterQueue cq-<ns> of quota cpu (in cohort, if any) and a LocalQueue
// lq pointing to it: the world of the tests with two tenants.
func teamQueues(cohort, quota string) string {
	config := `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
`
	spec := "spec:\n"
	if cohort != "" {
		spec += "  cohort: " + cohort + "\n"
	}
	for _, ns := range []string{"team-a", "team-b"} {
		config += `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-` + ns + `}
` + spec + `  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: rf, resources: [{name: cpu, nominalQuota: "` + quota + `"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ` + ns + `}
spec: {clusterQueue: cq-` + ns + `}
`
	}
	return config
}
