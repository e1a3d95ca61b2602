package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// The tenant-isolation suite: two teams and a viewer against the five
// services on the shipped NATS accounts, with the shipped roles. alice is
// team-a's batch-user, carol team-b's, victor team-b's batch-viewer; a
// request without a token is the administrator (securedPolicy).
const tenantTokens = `alice-token,alice,alice-uid,"team-a-users"
carol-token,carol,carol-uid,"team-b-users"
victor-token,victor,victor-uid,"team-b-viewers"
`

const tenantPolicy = `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
subjects: [{kind: User, name: carol}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: victor, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-viewer}
subjects: [{kind: User, name: victor}]
`

// tenantWorld puts securedWorld's cq into a cohort with a ClusterQueue
// only team-b's queue points to, adds a priority class only team-b uses,
// and a roomy queue for team-b's measured submissions.
const tenantWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "9"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: b-confidential-cq}
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "3"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: b-confidential-lq, namespace: team-b}
spec: {clusterQueue: b-confidential-cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: b-work}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "1000"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: work, namespace: team-b}
spec: {clusterQueue: b-work}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: b-secret-class}
value: 777777
`

// secrets are what alice must never read: team-b's workload, queue and
// class names and its priority value.
var secrets = []string{"b-confidential", "b-secret", "777777"}

// tenants is a secured system with the tenants' tokens.
type tenants struct{ *secured }

func startTenants(t testing.TB) *tenants {
	s := startSecuredWith(t, tenantPolicy, tenantTokens)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(tenantWorld))
	return &tenants{s}
}

// as sends a request with token (none: the administrator) and returns
// the status and body.
func (s *tenants) as(token, method, path string, body []byte) (int, http.Header, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// secretWorkload is teamWorkload on queue with team-b's priority class
// (and its value, which Kueue requires with a class).
func secretWorkload(ns, queue, name, cpu string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},
 "spec":{"queueName":%q,"priorityClassName":"b-secret-class","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","priority":777777,
 "podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q}}}]}}}]}}`,
		name, ns, queue, cpu)
}

// leaks names the secrets body holds.
func leaks(body string) []string {
	var found []string
	for _, s := range secrets {
		if strings.Contains(body, s) {
			found = append(found, s)
		}
	}
	return found
}

// TestTenantSeesNoOtherTenant: team-b's pending workload is ahead of
// alice's in a shared ClusterQueue, its cohort holds a ClusterQueue only
// team-b uses, and its priority comes from a class only team-b uses;
// every read alice can make, over HTTP, the Kubernetes API paths and the
// push streams, answers without any of their names or that priority.
func TestTenantSeesNoOtherTenant(t *testing.T) {
	s := startTenants(t)
	// carol fills cq, then queues a high-priority workload ahead of
	// alice's; team-b also uses its own ClusterQueue in the cohort.
	for _, w := range [][]byte{
		teamWorkload("team-b", "b-confidential-acquisition-target", "9"),
		secretWorkload("team-b", "lq", "b-secret-pending", "5"),
		secretWorkload("team-b", "b-confidential-lq", "b-secret-lender", "1"),
	} {
		if code, _, body := s.as("carol-token", "POST", "/v1/workloads", w); code != http.StatusAccepted {
			t.Fatalf("carol's submission: %d %s", code, body)
		}
		s.sync() // in this order: the first takes cq whole
	}
	s.sync()
	if code, _, body := s.as("alice-token", "POST", "/v1/workloads", teamWorkload("team-a", "a-blocked", "5")); code != http.StatusAccepted {
		t.Fatalf("alice's submission: %d %s", code, body)
	}
	s.sync()
	// The world is as the test means it: b-secret-pending is ahead of
	// a-blocked (the administrator sees it).
	code, _, body := s.as("", "GET", "/v1/workloads/team-a/a-blocked/explain?counterfactual=false", nil)
	if code != http.StatusOK || !strings.Contains(body, "b-secret-pending") {
		t.Fatalf("the administrator's explain: %d %s, want team-b's workload ahead", code, body)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	reads := []string{
		"/v1/workloads",
		"/v1/workloads?namespace=team-a",
		"/v1/workloads?namespace=team-a&wide=true",
		"/v1/workloads/team-a/a-blocked",
		"/v1/workloads/team-a/a-blocked/explain",
		"/v1/workloads/team-a/a-blocked/explain?counterfactual=false",
		"/v1/workloads/team-a/a-blocked/explain?counterfactual=true",
		"/v1/workloads/team-a/a-blocked/explain?eta=true",
		"/v1/workloads/team-a/a-blocked/explain?at=" + now,
		"/v1/workloads/team-a/a-blocked/explain?at=" + now + "&counterfactual=true",
		"/v1/workloads?at=" + now,
		"/v1/eta",
		"/v1/eta?namespace=team-a",
		"/v1/clusterqueues",
		"/v1/clusterqueues/b-confidential-cq",
		"/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads",
		"/apis/kueue.x-k8s.io/v1beta1/workloads",
		"/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
		"/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues",
		"/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses",
		"/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/lq/pendingworkloads",
		"/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads",
		"/v1/workloads/team-b/b-secret-pending",
		"/v1/workloads/team-b/b-secret-pending/explain",
		"/v1/workloads?namespace=team-b",
	}
	served := 0
	for _, path := range reads {
		code, _, body := s.as("alice-token", "GET", path, nil)
		if code >= 500 {
			t.Errorf("alice GET %s: %d %s", path, code, body)
		}
		if code == http.StatusOK {
			served++
		}
		// An answer may repeat the names alice asked for, nothing more.
		echo := body
		for _, seg := range strings.Split(path, "/") {
			if seg != "" {
				echo = strings.ReplaceAll(echo, seg, "")
			}
		}
		if l := leaks(echo); len(l) > 0 {
			t.Errorf("alice GET %s (%d) reads team-b's %v: %s", path, code, l, body)
		}
	}
	// Nor does a refusal say whether what she named exists.
	_, _, exists := s.as("alice-token", "GET", "/v1/workloads/team-b/b-secret-pending", nil)
	_, _, absent := s.as("alice-token", "GET", "/v1/workloads/team-b/b-secret-absent", nil)
	if strings.ReplaceAll(exists, "b-secret-pending", "X") != strings.ReplaceAll(absent, "b-secret-absent", "X") {
		t.Errorf("alice's refusals differ for an existing and a missing workload:\n%s\n%s", exists, absent)
	}
	if served < 12 {
		t.Errorf("alice was served %d of %d reads, want her own namespace's reads served", served, len(reads))
	}
	// What-if over alice's own namespace.
	code, _, body = s.as("alice-token", "POST", "/v1/whatif", teamWorkload("team-a", "a-whatif", "2"))
	if l := leaks(body); len(l) > 0 || code >= 500 {
		t.Errorf("alice's what-if: %d, reads team-b's %v: %s", code, l, body)
	}
	// The push streams, while team-b's workloads change.
	streams := []string{"/v1/watch/workloads", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true"}
	bodies := make([]bytes.Buffer, len(streams))
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i, path := range streams {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+path, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("alice's stream %s: %d", path, resp.StatusCode)
		}
		wg.Go(func() {
			defer resp.Body.Close()
			_, _ = io.Copy(&bodies[i], resp.Body)
		})
	}
	if code, _, body := s.as("carol-token", "POST", "/v1/workloads", secretWorkload("team-b", "lq", "b-secret-live", "1")); code != http.StatusAccepted {
		t.Fatalf("carol's live submission: %d %s", code, body)
	}
	s.as("carol-token", "DELETE", "/v1/workloads/team-b/b-secret-pending", nil)
	if code, _, body := s.as("alice-token", "POST", "/v1/workloads", teamWorkload("team-a", "a-live", "1")); code != http.StatusAccepted {
		t.Fatalf("alice's live submission: %d %s", code, body)
	}
	s.sync()
	time.Sleep(time.Second) // the streams push what the projection holds
	cancel()
	wg.Wait()
	for i, path := range streams {
		if !strings.Contains(bodies[i].String(), "a-live") {
			t.Errorf("alice's stream %s did not push her own a-live: %s", path, bodies[i].String())
		}
		if l := leaks(bodies[i].String()); len(l) > 0 {
			t.Errorf("alice's stream %s pushed team-b's %v", path, l)
		}
	}
	// victor views team-b and nothing of team-a's.
	if code, _, _ := s.as("victor-token", "GET", "/v1/workloads/team-b/b-secret-lender", nil); code != http.StatusOK {
		t.Errorf("victor reading team-b: %d, want 200", code)
	}
	if code, _, body := s.as("victor-token", "GET", "/v1/workloads/team-a/a-blocked", nil); code != http.StatusForbidden {
		t.Errorf("victor reading team-a: %d %s, want 403", code, body)
	}
	if code, _, body := s.as("victor-token", "POST", "/v1/workloads", teamWorkload("team-b", "b-viewer", "1")); code != http.StatusForbidden {
		t.Errorf("victor submitting: %d %s, want 403", code, body)
	}
	// Unauthenticated reads with a wrong token are 401, not answers.
	if code, _, body := s.as("no-such-token", "GET", "/v1/workloads", nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s, want 401", code, body)
	}
}

// TestTenantCannotOutrankAnother: a batch-user's Workload cannot choose a
// priority above its class's, over HTTP or its namespace's durable NATS
// subject; team-b's admitted workload is never preempted by it.
func TestTenantCannotOutrankAnother(t *testing.T) {
	s := startTenants(t)
	if code, _, body := s.as("carol-token", "POST", "/v1/workloads", teamWorkload("team-b", "b-running", "9")); code != http.StatusAccepted {
		t.Fatalf("carol: %d %s", code, body)
	}
	s.sync()
	forged := []string{
		`"priority":2000000000`,
		`"priorityClassName":"b-secret-class","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","priority":2000000000`,
	}
	for i, extra := range forged {
		w := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"a-forged-%d","namespace":"team-a"},
 "spec":{"queueName":"lq",%s,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"9"}}}]}}}]}}`, i, extra)
		code, _, body := s.as("alice-token", "POST", "/v1/workloads", []byte(w))
		if code != http.StatusForbidden || !strings.Contains(body, "spec.priority") {
			t.Errorf("alice's Workload with %s: %d %s, want 403 naming spec.priority", extra, code, body)
		}
	}
	// The same over team-a's durable subject: rejected, not admitted.
	nc, _ := s.conn("team-a")
	rejected, err := nc.SubscribeSync("jq.rejected.team-a.>")
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(ingest.SubmitSubjectOf("team-a", "a-forged-nats"))
	m.Header.Set(events.HeaderSpecVersion, "1.0")
	m.Header.Set(events.HeaderID, "a-forged-nats")
	m.Header.Set(events.HeaderType, ingest.SubmitType)
	m.Header.Set(events.HeaderSource, "test")
	m.Data = []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"a-forged-nats","namespace":"team-a"},
 "spec":{"queueName":"lq","priority":2000000000,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"9"}}}]}}}]}}`)
	if _, err := nc.RequestMsg(m, 10*time.Second); err != nil {
		t.Fatalf("durable publish: %v", err)
	}
	rej, err := rejected.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("the forged durable submission was not rejected: %v", err)
	}
	if rej.Header.Get("Status") != "403" || !strings.Contains(string(rej.Data), "spec.priority") {
		t.Errorf("durable rejection: %s %s, want 403 naming spec.priority", rej.Header.Get("Status"), rej.Data)
	}
	s.sync()
	if st := s.statusOf("team-b", "b-running"); st != "admitted" {
		t.Errorf("team-b's b-running is %q, want admitted", st)
	}
	for _, v := range s.workloads() {
		if strings.HasPrefix(v.Name, "a-forged") {
			t.Errorf("a forged workload is in the projection: %+v", v)
		}
	}
	if ev := s.evictedSince(new(uint64)); len(ev) != 0 {
		t.Errorf("evictions %v, want none", ev)
	}
}

// isolation is what a noisy tenant did to a quiet one.
type isolation struct {
	quiet, noisy       []time.Duration // carol's submit→admitted
	carolRefused       int             // carol's answers that were not 2xx (after retries)
	aliceHeavy         map[int]int     // alice's heavy reads by status
	aliceFlood         int             // durable submissions the stream took from alice
	aliceFloodRefused  bool            // the stream refused alice at last
	carolHeavyStatuses map[int]int
}

// measureIsolation submits n of carol's workloads one at a time, quietly,
// then again while alice runs heavy reads on readers goroutines and floods
// her durable subject.
func measureIsolation(t testing.TB, s *tenants, n, readers int) isolation {
	// A backlog of alice's own, for her reads to chew on.
	var backlog []string
	for i := range 300 {
		backlog = append(backlog, string(teamWorkload("team-a", fmt.Sprintf("a-backlog-%d", i), "5")))
	}
	if code, _, body := s.as("alice-token", "POST", "/v1/workloads", []byte(`{"apiVersion":"v1","kind":"List","items":[`+strings.Join(backlog, ",")+`]}`)); code >= 300 {
		t.Fatalf("alice's backlog: %d %s", code, body)
	}
	s.sync()
	res := isolation{aliceHeavy: map[int]int{}, carolHeavyStatuses: map[int]int{}}
	res.quiet = s.carolSubmits(t, "quiet", n, &res)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	heavy := []string{
		"/v1/workloads/team-a/a-backlog-299/explain?counterfactual=true",
		"/v1/eta?namespace=team-a&offset=250&limit=50",
		"/v1/workloads?namespace=team-a&at=" + time.Now().UTC().Format(time.RFC3339Nano),
	}
	for i := range readers {
		wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", s.base+heavy[(i+k)%len(heavy)], nil)
				req.Header.Set("Authorization", "Bearer alice-token")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				res.aliceHeavy[resp.StatusCode]++
				mu.Unlock()
				// Noisy, not broken: she waits as told, as jqctl does.
				if d, err := time.ParseDuration(resp.Header.Get("Retry-After") + "s"); err == nil {
					select {
					case <-time.After(d):
					case <-ctx.Done():
					}
				}
			}
		})
	}
	var flooded atomic.Int64
	var floodRefused atomic.Bool
	nc, _ := s.conn("team-a")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		junk := bytes.Repeat([]byte("x"), 64<<10)
		for i := 0; ctx.Err() == nil && i < 20000; i++ {
			m := nats.NewMsg(ingest.SubmitSubjectOf("team-a", fmt.Sprintf("flood-%d", i)))
			m.Header.Set(events.HeaderID, fmt.Sprintf("flood-%d", i))
			m.Header.Set(events.HeaderType, ingest.SubmitType)
			m.Data = junk
			if _, err := js.PublishMsg(ctx, m); err != nil {
				if ctx.Err() == nil {
					floodRefused.Store(true)
				}
				continue
			}
			flooded.Add(1)
		}
	})
	// While alice is at it, carol's own heavy read is served.
	time.Sleep(2 * time.Second)
	for range 3 {
		code, _, _ := s.as("carol-token", "GET", "/v1/eta?namespace=team-b", nil)
		res.carolHeavyStatuses[code]++
	}
	res.noisy = s.carolSubmits(t, "noisy", n, &res)
	cancel()
	wg.Wait()
	res.aliceFlood, res.aliceFloodRefused = int(flooded.Load()), floodRefused.Load()
	return res
}

// carolSubmits submits n workloads of carol's one at a time and returns
// each one's time from the submission to its admission, read from the
// projection. A 503 or 429 is retried with the same key, as a client
// must; any other refusal counts in res.carolRefused.
func (s *tenants) carolSubmits(t testing.TB, tag string, n int, res *isolation) []time.Duration {
	var took []time.Duration
	for i := range n {
		name := fmt.Sprintf("b-%s-%d", tag, i)
		start := time.Now()
		for try := 0; ; try++ {
			req, _ := http.NewRequest("POST", s.base+"/v1/workloads", bytes.NewReader(secretWorkload("team-b", "work", name, "1")))
			req.Header.Set("Authorization", "Bearer carol-token")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", name)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode < 300 {
					break
				}
				if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests {
					res.carolRefused++
					break
				}
			}
			if try == 20 {
				res.carolRefused++
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		testenv.Eventually(t, name+" admitted", 2*time.Minute, func() error {
			code, _, body := s.as("carol-token", "GET", "/v1/workloads/team-b/"+name, nil)
			if code != http.StatusOK || !strings.Contains(body, `"status":"admitted"`) {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		took = append(took, time.Since(start))
	}
	return took
}

func p(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// TestNoisyTenantDoesNotStarveAnother: while alice runs the heaviest
// reads on 8 connections and floods her durable subject, every one of
// carol's submissions is taken (a 503 retried to success at worst) and
// admitted, carol's own heavy reads are served, and alice's beyond her
// share are refused (429). That the flood cannot fill the shared stream
// is TestOneNamespaceCannotFillJQSubmit's. Times are printed, not
// asserted (BenchmarkTenantIsolation reports them).
func TestNoisyTenantDoesNotStarveAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of load")
	}
	s := startTenants(t)
	res := measureIsolation(t, s, 15, 8)
	t.Logf("carol submit→admitted p50/p99: quiet %v/%v, noisy %v/%v; alice's heavy reads by status %v; carol's heavy reads %v; alice's flood taken %d, refused %v",
		p(res.quiet, 0.5), p(res.quiet, 0.99), p(res.noisy, 0.5), p(res.noisy, 0.99), res.aliceHeavy, res.carolHeavyStatuses, res.aliceFlood, res.aliceFloodRefused)
	if res.carolRefused != 0 {
		t.Errorf("%d of carol's submissions were refused", res.carolRefused)
	}
	if res.carolHeavyStatuses[http.StatusOK] == 0 {
		t.Errorf("carol's heavy reads while alice's ran: %v, want some served", res.carolHeavyStatuses)
	}
	if res.aliceHeavy[http.StatusTooManyRequests] == 0 {
		t.Errorf("alice's heavy reads by status %v: her 8 at once were never limited (429)", res.aliceHeavy)
	}
}

// BenchmarkTenantIsolation prints carol's submit→admitted p50 and p99,
// quiet and while alice is noisy, from one run.
func BenchmarkTenantIsolation(b *testing.B) {
	for range b.N {
		s := startTenants(b)
		res := measureIsolation(b, s, 30, 8)
		b.ReportMetric(float64(p(res.quiet, 0.5).Milliseconds()), "quiet-p50-ms")
		b.ReportMetric(float64(p(res.quiet, 0.99).Milliseconds()), "quiet-p99-ms")
		b.ReportMetric(float64(p(res.noisy, 0.5).Milliseconds()), "noisy-p50-ms")
		b.ReportMetric(float64(p(res.noisy, 0.99).Milliseconds()), "noisy-p99-ms")
	}
}
