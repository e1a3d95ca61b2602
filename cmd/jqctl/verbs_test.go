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

// fakeAPI answers like ingest with canned bodies, so the CLI's rendering
// is pinned by golden files; the real API is exercised by the e2e suite.
func fakeAPI(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/apply", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "lendingLimit") {
			w.WriteHeader(400)
			io.WriteString(w, `{"errors":[{"object":"ClusterQueue/cq-a","field":"spec.resourceGroups[0].flavors[0].resources[0].lendingLimit","message":"must be nil when cohort is empty"}]}`)
			return
		}
		io.WriteString(w, `{"applied":[{"kind":"ResourceFlavor","name":"rf","action":"created"},{"kind":"LocalQueue","namespace":"team-a","name":"lq","action":"unchanged"}]}`)
	})
	mux.HandleFunc("POST /v1/workloads", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(202)
		io.WriteString(w, `{"namespace":"team-a","name":"train","uid":"u-1","seq":7}`)
	})
	mux.HandleFunc("GET /v1/workloads", func(w http.ResponseWriter, r *http.Request) {
		eta := ""
		if r.URL.Query().Get("eta") == "true" {
			eta = `,"eta":{"at":"2026-01-01T01:30:00Z","waitSeconds":5400,"assumption":"assumes team-a/train finishes as expected"}`
		}
		io.WriteString(w, `{"items":[
 {"namespace":"team-a","name":"train","localQueue":"lq","clusterQueue":"gpu","priority":100,"status":"admitted","assignment":{"main":{"cpu":"on-demand","nvidia.com/gpu":"a100"}},"evictions":0},
 {"namespace":"team-b","name":"etl","localQueue":"lq","clusterQueue":"cpu","priority":0,"status":"pending","reason":"WaitingForQuota","message":"couldn't assign flavors","evictions":2`+eta+`}],"next":""}`)
	})
	mux.HandleFunc("GET /v1/workloads/team-a/train", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"namespace":"team-a","name":"train","localQueue":"lq","clusterQueue":"gpu","priority":100,"status":"admitted",
 "assignment":{"main":{"cpu":"on-demand"}},"evictions":0,"events":[
 {"seq":5,"type":"io.jetqueue.workload.submitted.v1","time":"2026-01-01T00:00:00Z","data":{}},
 {"seq":6,"type":"io.jetqueue.workload.quotareserved.v1","time":"2026-01-01T00:00:01Z","data":{}}]}`)
	})
	mux.HandleFunc("GET /v1/workloads/team-b/etl/explain", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"namespace":"team-b","name":"etl","clusterQueue":"cpu","status":"pending","reason":"WaitingForQuota",
 "detail":{"reason":"WaitingForQuota","podSet":"main","resource":"cpu","flavor":"on-demand","cohort":"all","shortfall":1500,
 "message":"couldn't assign flavors to pod set main: insufficient unused quota in cohort for cpu in flavor on-demand, 1500m more needed"},
 "ahead":["team-a/a","team-a/b"],"aheadCount":2,
 "eta":{"at":"2026-01-01T01:30:00Z","waitSeconds":5400,"assumption":"assumes team-a/train (run time 2h0m0s, from its jetqueue.dev/expected-runtime annotation) finishes as expected, and no workload of higher priority arrives"}}`)
	})
	mux.HandleFunc("POST /v1/workloads/team-a/train/finish", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(202) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientVerbsOutput(t *testing.T) {
	srv := fakeAPI(t)
	dir := t.TempDir()
	cq := filepath.Join(dir, "cq.yaml")
	os.WriteFile(cq, []byte("kind: ClusterQueue\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("lendingLimit: 1\n"), 0o644)
	cases := []struct {
		golden string
		args   []string
		code   int
	}{
		{"apply", []string{"apply", "-f", cq}, 0},
		{"apply-invalid", []string{"apply", "-f", bad}, 2},
		{"submit", []string{"submit", "-f", cq}, 0},
		{"describe", []string{"describe", "team-a/train"}, 0},
		{"finish", []string{"finish", "team-a/train"}, 0},
		{"explain", []string{"explain", "team-b/etl"}, 0},
		{"bad-key", []string{"finish", "train"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append(tc.args, "--server", srv.URL), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.code, stderr.String())
			}
			checkGolden(t, filepath.Join("testdata", "client-"+tc.golden+".golden"), stdout.String(), strings.ReplaceAll(stderr.String(), srv.URL, "SERVER"))
		})
	}
}
