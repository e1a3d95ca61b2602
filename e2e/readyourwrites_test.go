package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// TestSubmitThenGetShowsEverySubmission: workloads submitted over HTTP
// and over NATS request/reply, then listed at once with the last answer's
// sequence (?minSeq=), are all there.
func TestSubmitThenGetShowsEverySubmission(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("100")))
	nc := s.natsConn()
	const n = 40
	var last uint64
	for i := range n {
		var body []byte
		if i%2 == 0 {
			var raw json.RawMessage
			if code := s.call("POST", "/v1/workloads", cpuWorkload(fmt.Sprint("h", i)), &raw); code != http.StatusAccepted {
				t.Fatalf("submit over HTTP: %d %s", code, raw)
			}
			body = raw
		} else {
			code, raw := request(t, nc, ingest.SubjectSubmit, cpuWorkload(fmt.Sprint("n", i)))
			if code != http.StatusAccepted {
				t.Fatalf("submit over NATS: %d %s", code, raw)
			}
			body = raw
		}
		var sub struct{ Seq uint64 }
		if err := json.Unmarshal(body, &sub); err != nil || sub.Seq <= last {
			t.Fatalf("submission %d answered %s: want a sequence above the previous %d", i, body, last)
		}
		last = sub.Seq
	}
	var page struct {
		Items []view `json:"items"`
	}
	if code := s.call("GET", fmt.Sprintf("/v1/workloads?limit=1000&minSeq=%d", last), nil, &page); code != http.StatusOK {
		t.Fatalf("list: %d", code)
	}
	if len(page.Items) != n {
		t.Errorf("listed %d workloads right after submitting %d", len(page.Items), n)
	}
}
