package ingest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/events"
)

// TestAmbiguousParametersAreRefused: a parameter or header given twice
// (?minSeq=1&minSeq=2, two JQ-Min-Seq or Idempotency-Key headers) is 400
// naming it, where the first value used to be taken silently.
func TestAmbiguousParametersAreRefused(t *testing.T) {
	g := newGuarded(t, false, true)
	for _, tc := range []struct {
		name, method, path, body, field string
		header                          [][2]string
	}{
		// Sequence 0 asks for no wait: either value alone is answered 200.
		{"minSeq twice", "GET", "/v1/workloads?namespace=team-a&minSeq=0&minSeq=0", "", "minSeq", nil},
		{"minSeqTimeout twice", "GET", "/v1/workloads?namespace=team-a&minSeqTimeout=1s&minSeqTimeout=2s", "", "minSeqTimeout", nil},
		{"JQ-Min-Seq twice", "GET", "/v1/workloads?namespace=team-a", "", HeaderMinSeq, [][2]string{{HeaderMinSeq, "0"}, {HeaderMinSeq, "0"}}},
		{"Idempotency-Key twice", "POST", "/v1/workloads", nsWorkload("team-a", "twice"), "Idempotency-Key",
			[][2]string{{"Idempotency-Key", "k1"}, {"Idempotency-Key", "k2"}, {"Content-Type", "application/json"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, g.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer alice-token")
			for _, h := range tc.header {
				req.Header.Add(h[0], h[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var body errorBody
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &body) != nil || len(body.Errors) != 1 || body.Errors[0].Field != tc.field {
				t.Fatalf("got %d %s, want 400 on %s", resp.StatusCode, raw, tc.field)
			}
		})
	}
	if n := g.messages(t); n != 0 {
		t.Errorf("%d events published, want none", n)
	}
}

// TestZeroTimeIsNotThePresent: ?at=0001-01-01T00:00:00Z is before any
// log (410), not the present the zero time stands for in the code.
func TestZeroTimeIsNotThePresent(t *testing.T) {
	g := newGuarded(t, false, true)
	for _, path := range []string{
		"/v1/workloads?namespace=team-a&at=0001-01-01T00:00:00Z",
		"/v1/workloads/team-a/w/explain?at=0001-01-01T00:00:00Z",
	} {
		if code, _, body := g.call(t, "alice-token", "GET", path, ""); code != http.StatusGone || !strings.Contains(body, `"field":"at"`) {
			t.Errorf("GET %s: %d %s, want 410 on at", path, code, body)
		}
	}
}

// TestSubmitAuthorizesBeforeItValidates: a caller who may not create in
// a namespace is refused (403) before its documents are validated, so a
// refusal tells it nothing about them (here, that a class is missing or
// a field wrong).
func TestSubmitAuthorizesBeforeItValidates(t *testing.T) {
	g := newGuarded(t, false, true)
	for name, body := range map[string]string{
		"missing class": prioWorkload("v1beta1", "team-b", "x", `"priorityClassName":"no-such-class","priority":3`),
		"invalid":       strings.Replace(nsWorkload("team-b", "y"), `"count":1`, `"count":-1`, 1),
	} {
		code, _, out := g.call(t, "alice-token", "POST", "/v1/workloads", body, "Content-Type", "application/json")
		if code != http.StatusForbidden {
			t.Errorf("%s, in a namespace alice may not create in: %d %s, want 403", name, code, out)
		}
	}
}

// TestFutureSequencesAreRefused: a watch from a resourceVersion, or a
// console stream from a seq, past the log's end is 400 at once: this
// server never gave it, and the watch would wait for other writes to
// reach it, perhaps forever.
func TestFutureSequencesAreRefused(t *testing.T) {
	g := newGuarded(t, false, true)
	if code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads", nsWorkload("team-a", "w"), "Content-Type", "application/json"); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	for _, tc := range []struct{ path, field string }{
		{"/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true&resourceVersion=999999", "resourceVersion"},
		{"/v1/watch/workloads?namespace=team-a&since=999999", "since"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url+tc.path, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v (no answer)", tc.path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("GET %s: %d %s, want 400 on %s", tc.path, resp.StatusCode, raw, tc.field)
		}
	}
	// The log's own last sequence is still a place to watch from.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/watch/workloads?namespace=team-a&since=1", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("since=1: %v %v, want 200", err, resp)
	} else {
		resp.Body.Close()
	}
}

// TestClientUIDsAreReplaced: as the API server assigns metadata.uid, a
// tenant's Workload gets a uid ingest derives, whatever it sent (here the
// uid of another namespace's workload); jetqueue's own doors in
// system:masters (the Job bridge) keep theirs.
func TestClientUIDsAreReplaced(t *testing.T) {
	g := newGuarded(t, false, true)
	withUID := func(ns, name, uid string) string {
		return strings.Replace(nsWorkload(ns, name), `"name":"`+name+`"`, `"name":"`+name+`","uid":"`+uid+`"`, 1)
	}
	if code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads", withUID("team-a", "a1", "uid-of-team-b"), "Content-Type", "application/json"); code != http.StatusAccepted {
		t.Fatalf("alice: %d %s", code, body)
	}
	if uid := storedUID(t, g.frontDoor, "team-a", "a1"); uid == "uid-of-team-b" || uid == "" {
		t.Errorf("alice's workload stored with uid %q, want one ingest derived", uid)
	}
	req := httptest.NewRequestWithContext(auth.WithUser(t.Context(), auth.User{Name: "bridge", Groups: []string{auth.GroupMasters}}),
		"POST", "/v1/workloads", strings.NewReader(withUID("team-b", "b1", "job-uid-1")))
	rec := httptest.NewRecorder()
	g.routes().ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("system:masters: %d %s", rec.Code, rec.Body)
	}
	if uid := storedUID(t, g.frontDoor, "team-b", "b1"); uid != "job-uid-1" {
		t.Errorf("system:masters' workload stored with uid %q, want job-uid-1 as sent", uid)
	}
}

// storedUID is the uid of the workload the log's submission holds.
func storedUID(t *testing.T, f *frontDoor, ns, name string) string {
	t.Helper()
	_, ev, err := f.last(t.Context(), events.WorkloadSubject(ns, name))
	if err != nil || ev == nil {
		t.Fatalf("no submission of %s/%s: %v", ns, name, err)
	}
	var wl struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ev.Data.(*events.WorkloadSubmittedData).Workload, &wl); err != nil {
		t.Fatal(err)
	}
	return wl.Metadata.UID
}
