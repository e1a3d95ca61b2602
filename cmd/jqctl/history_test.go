package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryFlags: --at, --counterfactual and whatif's window reach the
// API as its parameters, and the answers are rendered.
func TestHistoryFlags(t *testing.T) {
	var queries []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workloads/team-a/sweep/explain", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		io.WriteString(w, `{"namespace":"team-a","name":"sweep","clusterQueue":"research-gpu","status":"pending",
 "asOf":{"at":"2026-01-01T10:00:00Z","seq":26},
 "counterfactuals":{"outcome":"Searched","changes":[
  {"kind":"Quota","message":"admissible if ClusterQueue research-gpu had 4 more nvidia.com/gpu on gpu-a100","alsoAdmitted":[{"namespace":"a","name":"b"}]},
  {"kind":"Finish","message":"admissible if another workload finished","alsoAdmitted":[]}]}}`)
	})
	mux.HandleFunc("GET /v1/workloads", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		io.WriteString(w, `{"items":[],"next":""}`)
	})
	mux.HandleFunc("GET /v1/clusterqueues/research-gpu", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		io.WriteString(w, `{"name":"research-gpu"}`)
	})
	mux.HandleFunc("POST /v1/whatif", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		io.WriteString(w, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","arrivals":3,"steps":9,
 "clusterQueues":[{"clusterQueue":"cq","old":{"admitted":3,"meanWaitSeconds":600,"p95WaitSeconds":1200,"usage":[{"flavor":"rf","resource":"cpu","percent":50}],"preemptions":1},
  "new":{"admitted":3,"meanWaitSeconds":0,"p95WaitSeconds":0,"usage":[{"flavor":"rf","resource":"cpu","percent":16.667}]}}],
 "moved":[{"namespace":"ns","name":"w2","clusterQueue":"cq","old":"2026-01-01T00:20:00Z","new":"2026-01-01T00:00:00Z","deltaSeconds":-1200},
  {"hidden":true,"clusterQueue":"cq","old":"2026-01-01T00:10:00Z","new":null}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(cfg, []byte("kind: ClusterQueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := "2026-01-01T10:00:00Z"
	for _, tc := range []struct {
		args  []string
		query string
		out   []string
		code  int
	}{
		{[]string{"explain", "team-a/sweep", "--at", at}, "at=2026-01-01T10%3A00%3A00Z&counterfactual=true",
			[]string{"As of:     2026-01-01T10:00:00Z (the log up to event 26)", "  - admissible if ClusterQueue research-gpu had 4 more nvidia.com/gpu on gpu-a100; 1 other workload(s) admitted too",
				"  - admissible if another workload finished\n"}, 0},
		{[]string{"explain", "team-a/sweep", "--counterfactual=false"}, "", nil, 0},
		{[]string{"get", "workloads", "--at", at}, "after=&at=2026-01-01T10%3A00%3A00Z&limit=1000", nil, 0},
		{[]string{"get", "cq", "research-gpu", "--at", at}, "at=2026-01-01T10%3A00%3A00Z", nil, 0},
		{[]string{"whatif", "-f", cfg, "--since", "24h"}, "since=24h",
			[]string{"cq            3 → 3     10m0s → 0s  20m0s → 0s  rf/cpu 50.0% → rf/cpu 16.7%  1 → 0", "ns/w2               cq            2026-01-01T00:20:00Z  2026-01-01T00:00:00Z  -1200s",
				"(another workload)  cq            2026-01-01T00:10:00Z  never"}, 0},
		{[]string{"whatif", "-f", cfg, "--from", at, "--to", at}, "from=2026-01-01T10%3A00%3A00Z&to=2026-01-01T10%3A00%3A00Z", nil, 0},
		{[]string{"whatif", "-f", cfg, "--since", "1h", "--from", at}, "", nil, 2},
	} {
		queries = nil
		var stdout, stderr bytes.Buffer
		code := run(append(tc.args, "--server", srv.URL), &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d; %s", tc.args, code, tc.code, stderr.String())
			continue
		}
		if tc.code != 0 {
			continue
		}
		if len(queries) != 1 || queries[0] != tc.query {
			t.Errorf("%v: queries %q, want %q", tc.args, queries, tc.query)
		}
		for _, want := range tc.out {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, want, stdout.String())
			}
		}
	}
}
