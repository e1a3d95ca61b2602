package e2e

import (
	"net/http"
	"os"
	"testing"
)

// TestExamplesWork runs the README's quick start: the examples apply and
// the sample Job is admitted.
func TestExamplesWork(t *testing.T) {
	s := start(t)
	for _, f := range []struct {
		path   string
		method string
		url    string
		status int
	}{{"../examples/quickstart.yaml", "POST", "/v1/apply", http.StatusOK}, {"../examples/job.yaml", "POST", "/v1/workloads", http.StatusAccepted}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		s.must(f.status, f.method, f.url, data)
	}
	s.sync()
	ws := s.workloads()
	if len(ws) != 1 || ws[0].Status != "admitted" || ws[0].PodCounts["main"] != 3 {
		t.Errorf("sample job: %+v", ws)
	}
}
