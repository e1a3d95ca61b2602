package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

const rfYAML = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n"

const workloadJSON = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"ns"},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`

// streamLen counts the events in JQ_EVENTS.
func (s *system) streamLen() uint64 { return s.streamState().Msgs }

type errorBody struct {
	Errors []api.FieldError `json:"errors"`
}

// TestBadInputIsRefusedWithoutEffect: every bad request gets its documented
// status and an error naming the object and field, and the stream does
// not move.
func TestBadInputIsRefusedWithoutEffect(t *testing.T) {
	s := start(t)
	big := bytes.Repeat([]byte("#"), 2<<20)
	cases := []struct {
		name       string
		method     string
		path       string
		body       string
		status     int
		wantObject string
		wantField  string
	}{
		{"malformed YAML", "POST", "/v1/apply", "kind: [unclosed", 400, "", ""},
		{"unknown kind", "POST", "/v1/apply", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: x}\n", 400, "", "kind"},
		{"unknown field", "POST", "/v1/apply", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec: {cohortt: x}\n", 400, "ClusterQueue/cq", "spec.cohortt"},
		{"one bad document applies nothing", "POST", "/v1/apply", rfYAML + "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: rf\n      resources:\n      - {name: cpu, nominalQuota: \"4\", lendingLimit: \"5\"}\n", 400, "ClusterQueue/cq", "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"},
		{"workload sent to apply", "POST", "/v1/apply", workloadJSON, 400, "Workload/ns/w", "kind"},
		{"negative quota", "POST", "/v1/apply", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: rf\n      resources:\n      - {name: cpu, nominalQuota: \"-1\"}\n", 400, "ClusterQueue/cq", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"},
		{"oversize body", "POST", "/v1/workloads", string(big), 413, "", ""},
		{"empty body", "POST", "/v1/workloads", "", 400, "", ""},
		{"config sent as workload", "POST", "/v1/workloads", rfYAML, 400, "ResourceFlavor/rf", "kind"},
		{"invalid workload", "POST", "/v1/workloads", strings.Replace(workloadJSON, `"count":1`, `"count":0`, 1), 400, "Workload/ns/w", "spec.podSets[0].count"},
		{"unknown workload", "POST", "/v1/workloads/ns/ghost/finish", "", 404, "Workload/ns/ghost", ""},
		{"bad priority body", "POST", "/v1/workloads/ns/ghost/priority", `{"priority":"high"}`, 400, "Workload/ns/ghost", "priority"},
		{"unknown config kind", "DELETE", "/v1/widgets/x", "", 404, "", "kind"},
		{"missing config object", "DELETE", "/v1/clusterqueues/nope", "", 404, "ClusterQueue/nope", ""},
		{"bad page size", "GET", "/v1/workloads?limit=5000", "", 400, "", "limit"},
		{"bad cursor", "GET", "/v1/workloads?after=%25%25", "", 400, "", "after"},
	}
	before := s.streamLen()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out errorBody
			code := s.call(tc.method, tc.path, []byte(tc.body), &out)
			if code != tc.status {
				t.Fatalf("status %d, want %d (%+v)", code, tc.status, out)
			}
			if len(out.Errors) == 0 {
				t.Fatal("no error body")
			}
			found := false
			for _, e := range out.Errors {
				if (tc.wantObject == "" || e.Object == tc.wantObject) && (tc.wantField == "" || e.Field == tc.wantField) && e.Message != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("no error names object %q field %q: %+v", tc.wantObject, tc.wantField, out.Errors)
			}
		})
	}
	if after := s.streamLen(); after != before {
		t.Errorf("bad requests published %d events", after-before)
	}
}

// TestResubmissionIsIdempotentAndConflictsAreRefused pins API.md: the same
// body or Idempotency-Key again answers 200 with the same answer; a
// different body under a taken name answers 409; a deleted name may be
// submitted again.
func TestResubmissionIsIdempotentAndConflictsAreRefused(t *testing.T) {
	s := start(t)
	type answer struct {
		Namespace, Name, UID string
		Seq                  uint64
	}
	var first, again answer
	if code := s.call("POST", "/v1/workloads", []byte(workloadJSON), &first); code != http.StatusAccepted {
		t.Fatalf("first submit: %d", code)
	}
	if code := s.call("POST", "/v1/workloads", []byte(workloadJSON), &again); code != http.StatusOK || again != first {
		t.Fatalf("identical resubmit: %d %+v, want 200 %+v", code, again, first)
	}
	changed := strings.Replace(workloadJSON, `"cpu":"1"`, `"cpu":"2"`, 1)
	var conflict errorBody
	if code := s.call("POST", "/v1/workloads", []byte(changed), &conflict); code != http.StatusConflict {
		t.Fatalf("conflicting resubmit: %d %+v", code, conflict)
	}
	keyed := strings.Replace(workloadJSON, `"name":"w"`, `"name":"k"`, 1)
	req := func(body string) (int, answer) {
		r, _ := http.NewRequest("POST", s.base+"/v1/workloads", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "key-1")
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a
	}
	c1, a1 := req(keyed)
	c2, a2 := req(keyed)
	if c1 != http.StatusAccepted || c2 != http.StatusOK || a1 != a2 {
		t.Fatalf("Idempotency-Key: %d %+v then %d %+v", c1, a1, c2, a2)
	}
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/ns/w", nil)
	// The same document again, after the deletion: a new workload (a new
	// event id and UID, both derived from the name's place in the log),
	// not a retry of the first.
	var reborn answer
	if code := s.call("POST", "/v1/workloads", []byte(workloadJSON), &reborn); code != http.StatusAccepted || reborn.UID == first.UID || reborn.Seq <= first.Seq {
		t.Fatalf("submit after delete: %d %+v, want 202 with another UID than %+v", code, reborn, first)
	}
	if n := s.streamLen(); n != 4 {
		t.Errorf("stream holds %d events, want 4 (w, k, delete w, w again)", n)
	}
}

// TestBackpressureWhenAdmissionLags: with admission stopped, submissions
// beyond the allowed lag get 503 with Retry-After.
func TestBackpressureWhenAdmissionLags(t *testing.T) {
	s := start(t)
	s.stopIngest() // the one with the default lag
	s.stopAdmission()
	addr := make(chan string, 1)
	s.run("ingest-strict", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.nats, DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0", Auth: auth.Options{Anonymous: true}, MaxLag: 3,
			Listening: func(a string) { addr <- a }})
	})
	s.base = "http://" + <-addr
	codes := map[int]int{}
	for i := range 10 {
		req, _ := http.NewRequest("POST", s.base+"/v1/workloads", bytes.NewReader(cpuWorkload(fmt.Sprint("w", i))))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		time.Sleep(120 * time.Millisecond) // let the cached lag refresh
	}
	if codes[http.StatusServiceUnavailable] == 0 || codes[http.StatusAccepted] == 0 {
		t.Errorf("statuses %v: want some accepted, then 503s", codes)
	}
	// The lag that refused them is exported: the stream's end less
	// admission's progress mark, above the allowed 3.
	want := float64(s.streamState().LastSeq - s.marks()["admission"].Seq)
	var got float64
	for range 50 {
		if got, _ = value(s.scrape("ingest-strict"), "jetqueue_admission_lag_events"); got == want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != want || got <= 3 {
		t.Errorf("jetqueue_admission_lag_events = %v, want %v (above --max-admission-lag 3)", got, want)
	}
}
