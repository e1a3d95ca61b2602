package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/history"
)

// tenantWorld: team-a and team-b share the ClusterQueue cq-shared (3 cpu,
// cohort shared); team-b alone also has cq-b-acquisitions-secret (2 cpu,
// lending nothing), through its LocalQueue lq-b-secret. Every workload
// asks 1 cpu unless said.
const tenantWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-shared}
spec:
  cohort: shared
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 3}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-b-acquisitions-secret}
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2, lendingLimit: 0}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-a, namespace: team-a}
spec: {clusterQueue: cq-shared}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-b, namespace: team-b}
spec: {clusterQueue: cq-shared}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-b-secret, namespace: team-b}
spec: {clusterQueue: cq-b-acquisitions-secret}
`

// tenantSecrets is what team-b's answers hold that team-a's user may
// never read: its workloads' names, its own ClusterQueue and LocalQueue,
// the distinctive priorities of its workloads, and the run time (2h) of
// the one team-a's workload waits for.
var tenantSecrets = []string{"team-b", "b-doomed-secret-victim", "b-holder-secret", "b-preemptor-merger",
	"b-confidential-acquisition-target", "b-secret-runner", "cq-b-acquisitions-secret", "lq-b-secret",
	"2h0m0s", "7200"}

// secretNumbers are team-b's priorities, matched as whole numbers (not
// inside a UID or a time).
var secretNumbers = regexp.MustCompile(`(^|[^0-9a-fA-F])(777777|777778|313131|313132)([^0-9a-fA-F]|$)`)

// recordTenants writes the log of tenantWorld as the services would
// have, one arrival a minute, each followed by the decisions it caused:
//
//	b-doomed-secret-victim (priority 1), b-holder-secret (313131) and
//	a-running (5) fill cq-shared; a-preemptor (400000) preempts
//	b-doomed-secret-victim; b-preemptor-merger (777777, expected to run
//	2h) preempts a-running; a-blocked (6) waits, behind
//	b-confidential-acquisition-target (777777, 4 cpu: never fits), and
//	ahead of a-running and b-doomed-secret-victim. b-secret-runner runs in
//	team-b's own ClusterQueue.
func recordTenants(t *testing.T) []history.Record {
	t.Helper()
	rec := history.NewRecorder()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	objs, err := api.Decode([]byte(tenantWorld))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		api.Default(o)
		if err := rec.Apply(o, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		ns, lq, name string
		prio         int32
		cpu          int
		runtime      string
	}{
		{"team-b", "lq-b-secret", "b-secret-runner", 0, 1, ""},
		{"team-b", "lq-b", "b-doomed-secret-victim", 1, 1, ""},
		{"team-b", "lq-b", "b-holder-secret", 313131, 1, ""},
		{"team-a", "lq-a", "a-running", 5, 1, ""},
		{"team-a", "lq-a", "a-preemptor", 400000, 1, ""},
		{"team-b", "lq-b", "b-preemptor-merger", 777777, 1, "2h"},
		{"team-a", "lq-a", "a-blocked", 6, 1, ""},
		{"team-b", "lq-b", "b-confidential-acquisition-target", 777777, 4, ""},
	} {
		at = at.Add(time.Minute)
		ann := ""
		if w.runtime != "" {
			ann = fmt.Sprintf(`,"annotations":{%q:%q}`, api.ExpectedRuntimeAnnot, w.runtime)
		}
		doc := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q%s},`+
			`"spec":{"queueName":%q,"priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[`+
			`{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, w.name, w.ns, ann, w.lq, w.prio, w.cpu)
		wls, err := api.Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		api.Default(wls[0])
		if err := rec.Submit(wls[0].(*api.Workload), at); err != nil {
			t.Fatal(err)
		}
		rec.Settle(at)
	}
	return rec.Log
}

// readRequest is one request of a read route: its path (and body).
type readRequest struct {
	method, path, body string
	// want is the status team-a's user gets.
	want int
}

// TestNoTenantSeesAnother: every read route, asked by alice (batch-user
// in team-a), answers nothing of team-b but counts: no name of its
// workloads or of its own queues, none of its priorities, not the run
// time of its workload that hers waits for. The routes come from the
// route table: a read route without a case here fails the test. The same
// requests by a batch-admin name what alice's hide, so the world does
// reach every redaction.
func TestNoTenantSeesAnother(t *testing.T) {
	g := newGuarded(t, false, true)
	log := recordTenants(t)
	for _, r := range log {
		if _, _, err := bus.Publish(t.Context(), g.js, r.Event, nil); err != nil {
			t.Fatal(err)
		}
	}
	project(t, g.frontDoor)
	now := log[len(log)-1].Event.Time.Add(6 * time.Minute)
	g.cfg.Now = func() time.Time { return now }
	at := url.QueryEscape(now.Add(-time.Minute).Format(time.RFC3339))

	const vis = "/apis/visibility.kueue.x-k8s.io/"
	var cases = map[string][]readRequest{
		"GET /v1/workloads": {{path: "/v1/workloads", want: 200}, {path: "/v1/workloads?eta=true", want: 200},
			{path: "/v1/workloads?at=" + at, want: 200}, {path: "/v1/workloads?namespace=team-b", want: 403}},
		"GET /v1/workloads/{ns}/{name}": {{path: "/v1/workloads/team-a/a-running", want: 200},
			{path: "/v1/workloads/team-a/a-preemptor", want: 200}, {path: "/v1/workloads/team-a/a-blocked", want: 200}},
		"GET /v1/workloads/{ns}/{name}/explain": {
			{path: "/v1/workloads/team-a/a-blocked/explain", want: 200},
			{path: "/v1/workloads/team-a/a-blocked/explain?counterfactual=false", want: 200},
			{path: "/v1/workloads/team-a/a-blocked/explain?counterfactual=true", want: 200},
			{path: "/v1/workloads/team-a/a-blocked/explain?eta=true", want: 200},
			{path: "/v1/workloads/team-a/a-blocked/explain?at=" + at, want: 200},
			{path: "/v1/workloads/team-a/a-blocked/explain?at=" + at + "&counterfactual=true", want: 200},
			{path: "/v1/workloads/team-a/a-running/explain?counterfactual=true", want: 200}},
		"GET /v1/clusterqueues":        {{path: "/v1/clusterqueues", want: 403}},
		"GET /v1/clusterqueues/{name}": {{path: "/v1/clusterqueues/cq-shared", want: 403}},
		"/apis/":                       {{path: "/apis/nothing/here", want: 404}},
		"GET /v1/eta":                  {{path: "/v1/eta", want: 200}, {path: "/v1/eta?at=" + at, want: 200}},
		"GET /v1/watch/workloads":      {{path: "/v1/watch/workloads?since=1", want: 200}},
		"POST /v1/whatif":              {{method: "POST", path: "/v1/whatif?since=1h", body: tenantWorld, want: 403}},
		"GET /version":                 {{path: "/version", want: 200}},
		"GET /v1/sync":                 {{path: "/v1/sync?timeout=1ms", want: 504}},
		"GET /openapi/v3":              {{path: "/openapi/v3", want: 200}},
		"GET /v1/projection/rebuild":   {{path: "/v1/projection/rebuild", want: 403}},
	}
	for _, v := range visibilityVersions {
		cases["GET "+vis+v+"/clusterqueues/{cq}/pendingworkloads"] = []readRequest{{path: vis + v + "/clusterqueues/cq-shared/pendingworkloads", want: 403}}
		cases["GET "+vis+v+"/namespaces/{ns}/localqueues/{lq}/pendingworkloads"] = []readRequest{
			{path: vis + v + "/namespaces/team-a/localqueues/lq-a/pendingworkloads", want: 200}}
	}
	// The object API: every kind, read as alice may (her namespace) or
	// not (403); lists across namespaces and watches too.
	for pattern, d := range objectRoutes() {
		path := strings.TrimPrefix(pattern, "GET ")
		path = strings.ReplaceAll(path, "{ns}", "team-a")
		want := http.StatusForbidden
		switch d.Kind {
		case api.KindWorkload:
			want = 200
			path = strings.ReplaceAll(path, "{name}", "a-running")
		case api.KindLocalQueue:
			want = 200
			path = strings.ReplaceAll(path, "{name}", "lq-a")
		case api.KindClusterQueue:
			path = strings.ReplaceAll(path, "{name}", "cq-shared")
		default:
			path = strings.ReplaceAll(path, "{name}", "default")
		}
		rs := []readRequest{{path: path, want: want}}
		if !strings.Contains(pattern, "{name}") {
			rs = append(rs, readRequest{path: path + "?watch=true&timeoutSeconds=1", want: want})
		}
		cases[pattern] = rs
	}
	// Routes that change something answer only an acknowledgement; they
	// are not reads.
	writes := map[string]bool{"POST /v1/apply": true, "DELETE /v1/{kind}/{name}": true, "DELETE /v1/{kind}/{namespace}/{name}": true,
		"POST /v1/workloads": true, "DELETE /v1/workloads/{ns}/{name}": true, "POST /v1/workloads/{ns}/{name}/finish": true,
		"POST /v1/workloads/{ns}/{name}/podsready": true, "POST /v1/workloads/{ns}/{name}/priority": true,
		"POST /v1/workloads/{ns}/{name}/active": true, "POST /v1/debug/clock/advance": true, "POST /v1/projection/rebuild": true}
	_, patterns := g.routeTable()
	for _, p := range patterns {
		if _, ok := cases[p]; !ok && !writes[p] {
			t.Errorf("route %q has no case: add what a tenant reads through it to TestNoTenantSeesAnother (or list it among the writes)", p)
		}
	}

	bodies := map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(cases)) {
		for _, rq := range cases[p] {
			method := cmp.Or(rq.method, "GET")
			code, body := g.read(t, "alice-token", method, rq.path, rq.body)
			if code != rq.want {
				t.Errorf("%s %s as alice: %d, want %d: %s", method, rq.path, code, rq.want, body)
			}
			for _, s := range tenantSecrets {
				// A refusal may repeat what alice asked for, no more.
				if strings.Contains(body, s) && !strings.Contains(rq.path, s) {
					t.Errorf("%s %s as alice says %q: %s", method, rq.path, s, body)
				}
			}
			if m := secretNumbers.FindString(body); m != "" {
				t.Errorf("%s %s as alice says team-b's priority %q: %s", method, rq.path, m, body)
			}
			bodies[rq.path] = body
		}
	}

	// The counts stay: a-blocked has one workload ahead (team-b's), named
	// to no one in team-a.
	for _, q := range []string{"", "?counterfactual=false", "?eta=true", "?at=" + at} {
		var ex struct {
			Ahead       []string
			AheadCount  int
			AheadHidden int
		}
		if err := json.Unmarshal([]byte(bodies["/v1/workloads/team-a/a-blocked/explain"+q]), &ex); err != nil {
			t.Fatal(err)
		}
		if len(ex.Ahead) != 0 || ex.AheadCount != 1 || ex.AheadHidden != 1 {
			t.Errorf("explain%s: ahead %v, count %d, hidden %d; want none named of 1, 1 hidden", q, ex.Ahead, ex.AheadCount, ex.AheadHidden)
		}
	}
	// a-running has a-blocked (its own team's) ahead, named, and two of
	// team-b's, counted.
	var running struct {
		Ahead       []string
		AheadCount  int
		AheadHidden int
	}
	if err := json.Unmarshal([]byte(bodies["/v1/workloads/team-a/a-running/explain?counterfactual=true"]), &running); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(running.Ahead, []string{"team-a/a-blocked"}) || running.AheadCount != 2 || running.AheadHidden != 1 {
		t.Errorf("a-running's explanation: ahead %v, count %d, hidden %d; want [team-a/a-blocked] of 2, 1 hidden", running.Ahead, running.AheadCount, running.AheadHidden)
	}
	cf := bodies["/v1/workloads/team-a/a-blocked/explain?counterfactual=true"]
	for _, want := range []string{`"clusterQueueHidden":true`, "another ClusterQueue's lendingLimit", "2 workloads of other namespaces finished",
		"its priority were above that of a workload of another namespace", "assumes a workload of another namespace finishes"} {
		if !strings.Contains(cf, want) {
			t.Errorf("a-blocked's counterfactuals and ETA as alice do not say %q: %s", want, cf)
		}
	}
	if b := bodies["/v1/eta"]; !strings.Contains(b, `"total":2`) || !strings.Contains(b, "assumes a workload of another namespace finishes") {
		t.Errorf("GET /v1/eta as alice: want team-a's 2 pending workloads, a-blocked waiting on a hidden finish: %s", b)
	}
	if b := bodies["/v1/workloads/team-a/a-running"]; !strings.Contains(b, `"preemptor":{"hidden":true}`) {
		t.Errorf("a-running's history as alice does not hide its preemptor: %s", b)
	}
	if b := bodies["/v1/workloads/team-a/a-preemptor"]; !strings.Contains(b, `"victims":[{"hidden":true}]`) {
		t.Errorf("a-preemptor's history as alice does not hide its victim: %s", b)
	}
	if b := bodies["/v1/watch/workloads?since=1"]; !strings.Contains(b, "a-blocked") {
		t.Errorf("the push stream shows alice nothing of her own: %s", b)
	}

	// A batch-admin reads what alice's answers hide: the world reaches
	// every redaction above.
	for path, want := range map[string][]string{
		"/v1/workloads/team-a/a-blocked/explain":                      {"b-confidential-acquisition-target"},
		"/v1/workloads/team-a/a-blocked/explain?counterfactual=false": {"b-confidential-acquisition-target"},
		"/v1/workloads/team-a/a-blocked/explain?counterfactual=true": {"cq-b-acquisitions-secret", "team-b/b-holder-secret finished",
			"above 313131", "team-b/b-preemptor-merger (run time 2h0m0s"},
		"/v1/eta?namespace=team-a":                        {"team-b/b-preemptor-merger (run time 2h0m0s", `"seconds":7200`},
		"/v1/workloads/team-a/a-running":                  {`"preemptor":{"name":"b-preemptor-merger","namespace":"team-b"}`},
		"/v1/workloads/team-a/a-preemptor":                {`"name":"b-doomed-secret-victim"`},
		"/v1/workloads/team-a/a-blocked/explain?at=" + at: {"b-confidential-acquisition-target"},
	} {
		code, body := g.read(t, "olga-token", "GET", path, "")
		for _, w := range want {
			if code != 200 || !strings.Contains(body, w) {
				t.Errorf("GET %s as batch-admin: %d, does not say %q: %s", path, code, w, body)
			}
		}
	}
}

// read sends one request as token; a stream (the push stream) is read
// for a second.
func (g *guarded) read(t *testing.T, token, method, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if strings.HasPrefix(path, "/v1/watch/") {
		ctx, cancel = context.WithTimeout(t.Context(), time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if method == "POST" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPushStreamHidesOtherNamespacesQueues: a caller who may list
// ClusterQueues is told of configuration changes on the push stream, but
// of a LocalQueue only in a namespace where it may read LocalQueues.
func TestPushStreamHidesOtherNamespacesQueues(t *testing.T) {
	g := newGuarded(t, false, true)
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// fred: batch-user in team-a, and may list ClusterQueues.
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, append(shipped, `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: queue-lister}
rules: [{apiGroups: [kueue.x-k8s.io], resources: [clusterqueues], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fred-queues}
subjects: [{kind: User, name: fred}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: queue-lister}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fred-team-a, namespace: team-a}
subjects: [{kind: User, name: fred}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
`...), 0o600); err != nil {
		t.Fatal(err)
	}
	if g.guard.Policy, err = rbac.Load(policy); err != nil {
		t.Fatal(err)
	}
	for _, r := range recordTenants(t) {
		if _, _, err := bus.Publish(t.Context(), g.js, r.Event, nil); err != nil {
			t.Fatal(err)
		}
	}
	code, body := g.read(t, "fred-token", "GET", "/v1/watch/workloads?since=1", "")
	if code != http.StatusOK || !strings.Contains(body, `"name":"lq-a"`) || !strings.Contains(body, `"name":"cq-b-acquisitions-secret"`) {
		t.Fatalf("fred's push stream: %d, want team-a's LocalQueue and the ClusterQueues: %s", code, body)
	}
	for _, s := range []string{"lq-b", "team-b"} {
		if strings.Contains(body, s) {
			t.Errorf("fred's push stream says %q: %s", s, body)
		}
	}
}
