package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func runtimeWorkload(name, runtime string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns",
 "annotations":{"jetqueue.dev/expected-runtime":%q}},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, runtime)
}

// TestETAEndToEnd: two 1-cpu runs hold a 2-cpu queue, expected to run 10m
// and 20m; the third workload's ETA is the first one's end, 10m after it
// was admitted (worked out by hand), and it is admitted then when that run
// finishes on time.
func TestETAEndToEnd(t *testing.T) {
	s := startClient(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("2")))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", runtimeWorkload("short", "10m"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", runtimeWorkload("long", "20m"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", runtimeWorkload("next", "5m"))
	s.sync()
	if code := s.call("POST", "/v1/workloads", runtimeWorkload("bad", "forever"), nil); code != http.StatusBadRequest {
		t.Fatalf("an expected-runtime of forever: %d, want 400", code)
	}
	type estimate struct {
		At          *time.Time `json:"at"`
		WaitSeconds *float64   `json:"waitSeconds"`
		Assumption  string     `json:"assumption"`
		After       []struct{ Namespace, Name string }
	}
	var page struct {
		Items []struct {
			Namespace, Name string
			Position        int       `json:"positionInClusterQueue"`
			ETA             *estimate `json:"eta"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if code := s.call("GET", "/v1/eta?clusterQueue=cq", nil, &page); code != http.StatusOK || page.Total != 1 {
		t.Fatalf("GET /v1/eta: %d %+v", code, page)
	}
	it := page.Items[0]
	// Every workload was admitted at the manual clock's start.
	want := clock0.Add(10 * time.Minute)
	if it.Name != "next" || it.Position != 0 || it.ETA == nil || it.ETA.At == nil || !it.ETA.At.Equal(want) {
		t.Fatalf("next: %+v, want ETA %s", it, want)
	}
	if len(it.ETA.After) != 1 || it.ETA.After[0].Name != "short" {
		t.Fatalf("next waits on %+v, want short", it.ETA.After)
	}
	t.Log(it.ETA.Assumption)
	var ex struct {
		ETA *estimate `json:"eta"`
	}
	if code := s.call("GET", "/v1/workloads/ns/next/explain?counterfactual=true", nil, &ex); code != http.StatusOK || ex.ETA == nil || !ex.ETA.At.Equal(want) {
		t.Fatalf("explain: %d %+v", code, ex.ETA)
	}
	for _, bad := range []string{"limit=0", "offset=-1", "eta=maybe"} {
		path := "/v1/eta?" + bad
		if bad == "eta=maybe" {
			path = "/v1/workloads?" + bad
		}
		if code := s.call("GET", path, nil, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", path, code)
		}
	}
	// For real: short finishes on time.
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"10m"}`))
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/short/finish", []byte(`{"succeeded":true}`))
	s.sync()
	var v struct {
		Status     string     `json:"status"`
		AdmittedAt *time.Time `json:"admittedAt"`
	}
	s.call("GET", "/v1/workloads/ns/next", nil, &v)
	if v.Status != "admitted" || v.AdmittedAt == nil || !v.AdmittedAt.Equal(want) {
		t.Fatalf("next: %s at %v, want admitted at %s", v.Status, v.AdmittedAt, want)
	}
}
