package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scripted is an API that answers each request with the next of its
// statuses (the last one forever) and records the Idempotency-Key of each.
type scripted struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header
	keys     []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.ReadAll(r.Body)
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	status := s.statuses[min(len(s.keys), len(s.statuses))-1]
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	switch {
	case status < 300:
		io.WriteString(w, `{"namespace":"team-a","name":"gen-x1","uid":"u-1","seq":7}`)
	default:
		io.WriteString(w, `{"errors":[{"message":"`+http.StatusText(status)+`"}]}`)
	}
}

func (s *scripted) tries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// fakeRetry is a retry policy on a fake clock: sleeping moves it, and
// the waits are recorded; jitter takes the whole wait.
type fakeRetry struct {
	at     time.Time
	waited []time.Duration
}

func (f *fakeRetry) policy(budget time.Duration) *retryPolicy {
	f.at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &retryPolicy{budget: budget, now: func() time.Time { return f.at },
		sleep:  func(_ context.Context, d time.Duration) { f.waited = append(f.waited, d); f.at = f.at.Add(d) },
		jitter: func(d time.Duration) time.Duration { return d }}
}

func testClient(t *testing.T, server string, f *fakeRetry, budget time.Duration) *client {
	t.Helper()
	return &client{server: server, http: &http.Client{Timeout: 5 * time.Second}, seqFile: filepath.Join(t.TempDir(), "seq"),
		retry: f.policy(budget), newKey: func() string { return "key-1" }}
}

const generatedWorkload = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"generateName":"gen-","namespace":"team-a"},` +
	`"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`

// TestSubmitRetriesUnderOneKey: a submission refused 503 twice is sent a
// third time and accepted; every try carries the same Idempotency-Key,
// and each wait honours the server's Retry-After.
func TestSubmitRetriesUnderOneKey(t *testing.T) {
	api := &scripted{statuses: []int{503, 503, 202}, header: http.Header{"Retry-After": {"2"}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var f fakeRetry
	var out struct{ Name string }
	if err := testClient(t, srv.URL, &f, 30*time.Second).do("POST", "/v1/workloads", "application/json", []byte(generatedWorkload), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"key-1", "key-1", "key-1"}, api.tries()); diff != "" {
		t.Errorf("Idempotency-Key of each try (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{2 * time.Second, 2 * time.Second}, f.waited); diff != "" {
		t.Errorf("waits (-want,+got):\n%s", diff)
	}
	if out.Name != "gen-x1" {
		t.Errorf("answer %+v", out)
	}
}

// TestJqctlSubmitRetries: the same through the command, with the client
// jqctl builds: one generated key on every try.
func TestJqctlSubmitRetries(t *testing.T) {
	api := &scripted{statuses: []int{503, 502, 202}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("JQCTL_CONFIG", filepath.Join(dir, "config"))
	t.Setenv("JQ_SERVER", "")
	file := filepath.Join(dir, "wl.json")
	if err := os.WriteFile(file, []byte(generatedWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"submit", "-f", file, "--server", srv.URL}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	keys := api.tries()
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Errorf("Idempotency-Keys %q: want one key, three times", keys)
	}
}

// TestFinalAnswersAreNotRetried: a 4xx other than 429 is the request's
// fault and a 500 a bug: one try, and the answer's error.
func TestFinalAnswersAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 404, 409, 500} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			api := &scripted{statuses: []int{status, 202}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var f fakeRetry
			err := testClient(t, srv.URL, &f, 30*time.Second).do("POST", "/v1/workloads", "application/json", []byte(generatedWorkload), nil)
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != status {
				t.Errorf("error %v, want the %d", err, status)
			}
			if n := len(api.tries()); n != 1 {
				t.Errorf("%d tries, want 1", n)
			}
		})
	}
}

// TestRetriesStopAtTheBudget: a server that stays unavailable is tried
// with waits doubling from 100ms, capped at 5s, until the next wait would
// pass the budget; the last answer is the error.
func TestRetriesStopAtTheBudget(t *testing.T) {
	api := &scripted{statuses: []int{429}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var f fakeRetry
	err := testClient(t, srv.URL, &f, 30*time.Second).do("GET", "/v1/workloads", "", nil, nil)
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 429 {
		t.Errorf("error %v, want the 429", err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if diff := cmp.Diff(want, f.waited); diff != "" {
		t.Errorf("waits (-want,+got):\n%s", diff)
	}
	if n := len(api.tries()); n != len(want)+1 {
		t.Errorf("%d tries, want %d", n, len(want)+1)
	}
}

// TestConnectionFailuresAreRetried: a server not listening (yet) is tried
// again; the error says how often.
func TestConnectionFailuresAreRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var f fakeRetry
	err = testClient(t, "http://"+addr, &f, 2*time.Second).do("GET", "/v1/workloads", "", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "tries)") || len(f.waited) < 3 {
		t.Errorf("error %v after waits %v; want several tries", err, f.waited)
	}
}

// TestOnlyUnnamedSubmissionsGetAKey: the server recognizes a named
// workload sent again by its document, even from another jqctl run, and
// a key per run would make that run's answer a 409; a workload named by
// generateName has only the key to be recognized by.
func TestOnlyUnnamedSubmissionsGetAKey(t *testing.T) {
	named := strings.Replace(generatedWorkload, `"generateName":"gen-"`, `"name":"w"`, 1)
	key := func() string { return "k" }
	for _, tc := range []struct {
		name, method, path, body, want string
	}{
		{"generateName", "POST", "/v1/workloads", generatedWorkload, "k"},
		{"named", "POST", "/v1/workloads", named, ""},
		{"a list with one unnamed", "POST", "/v1/workloads", `{"apiVersion":"v1","kind":"List","items":[` + named + `,` + generatedWorkload + `]}`, "k"},
		{"not a submission", "POST", "/v1/apply", generatedWorkload, ""},
		{"undecodable", "POST", "/v1/workloads", "{", ""},
	} {
		if got := requestKey(tc.method, tc.path, []byte(tc.body), key); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	if got := retryAfter("3"); got != 3*time.Second {
		t.Errorf("seconds: %s", got)
	}
	if got := retryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)); got < 50*time.Second || got > time.Minute {
		t.Errorf("date: %s", got)
	}
	if got := retryAfter("soon"); got != 0 {
		t.Errorf("garbage: %s", got)
	}
}

// TestRetriesStopWithTheContext: a caller that gives up (loadtest's
// --timeout, an interrupt) is not held by a wait, however long the server
// asked for, and gets the last answer.
func TestRetriesStopWithTheContext(t *testing.T) {
	api := &scripted{statuses: []int{503}, header: http.Header{"Retry-After": {"60"}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	p, err := defaultRetryPolicy()
	if err != nil {
		t.Fatal(err)
	}
	p.budget = 2 * time.Minute
	c := testClient(t, srv.URL, &fakeRetry{}, 0)
	c.retry = &p
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err = c.doCtx(ctx, "GET", "/v1/workloads", "", nil, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("returned %s after the context ended", took)
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("error %v, want the 503", err)
	}
	if n := len(api.tries()); n != 1 {
		t.Errorf("%d tries, want 1", n)
	}
}
