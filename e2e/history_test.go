package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCounterfactualAppliedForRealAdmits asks explain for counterfactuals
// of a workload waiting for quota, then makes the quota change it names
// through POST /v1/apply, and sees the workload admitted end to end.
func TestCounterfactualAppliedForRealAdmits(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("2")))
	for i := range 3 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	var ex struct {
		Status          string `json:"status"`
		Counterfactuals struct {
			Outcome string `json:"outcome"`
			Changes []struct {
				Kind         string `json:"kind"`
				ClusterQueue string `json:"clusterQueue"`
				Amounts      []struct {
					Flavor, Resource string
					Value            int64
					To               string
				} `json:"amounts"`
				Workloads []struct{ Namespace, Name string } `json:"workloads"`
				Message   string                             `json:"message"`
			} `json:"changes"`
		} `json:"counterfactuals"`
	}
	if code := s.call("GET", "/v1/workloads/ns/w2/explain?counterfactual=true", nil, &ex); code != http.StatusOK {
		t.Fatalf("explain: %d", code)
	}
	if ex.Status != "pending" || ex.Counterfactuals.Outcome != "Searched" {
		t.Fatalf("explain w2: %+v", ex)
	}
	// Two 1-cpu workloads hold the queue's 2 cpu: one more cpu (1000m),
	// or one of them finishing, admits the third.
	var kinds []string
	for _, c := range ex.Counterfactuals.Changes {
		kinds = append(kinds, c.Kind)
		t.Log(c.Message)
	}
	if !cmp.Equal(kinds, []string{"Quota", "Finish"}) {
		t.Fatalf("kinds %v, want [Quota Finish]", kinds)
	}
	q := ex.Counterfactuals.Changes[0]
	if q.ClusterQueue != "cq" || len(q.Amounts) != 1 || q.Amounts[0].Value != 1000 || q.Amounts[0].To != "3" {
		t.Fatalf("quota change %+v, want cq rf/cpu +1000 to 3", q)
	}
	if f := ex.Counterfactuals.Changes[1]; len(f.Workloads) != 1 {
		t.Fatalf("finish change %+v, want one workload", f)
	}
	if code := s.call("GET", "/v1/workloads/ns/w2/explain?counterfactual=maybe", nil, nil); code != http.StatusBadRequest {
		t.Errorf("counterfactual=maybe: %d, want 400", code)
	}
	// The change, for real: 2 + 1 cpu.
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("3")))
	s.sync()
	for _, v := range s.workloads() {
		if v.Name == "w2" && v.Status != "admitted" {
			t.Fatalf("w2 is %s after the change, want admitted", v.Status)
		}
	}
}

// pit is what a point-in-time answer is compared on.
type pit struct {
	Namespace    string                       `json:"namespace"`
	Name         string                       `json:"name"`
	ClusterQueue string                       `json:"clusterQueue"`
	Priority     int32                        `json:"priority"`
	Status       string                       `json:"status"`
	Assignment   map[string]map[string]string `json:"assignment"`
	PodCounts    map[string]int32             `json:"podCounts"`
	Reason       string                       `json:"reason"`
	CreatedAt    time.Time                    `json:"createdAt"`
	Evictions    int                          `json:"evictions"`
}

type cqAt struct {
	Name     string `json:"name"`
	Pending  int    `json:"pending"`
	Admitted int    `json:"admitted"`
	Usage    []struct {
		Flavor, Resource        string
		Used, Nominal, Borrowed int64
	} `json:"usage"`
}

// TestPointInTimeMatchesCapturedState captures the projection's answers
// at an instant of a run on the manual clock, moves on (finishes,
// submissions, a priority change, a preemption, a config change), and asks
// for that instant with ?at=: the answers replayed from the log equal the
// ones captured then.
func TestPointInTimeMatchesCapturedState(t *testing.T) {
	s := startWith(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(strings.Replace(oneQueue("2"), "  namespaceSelector: {}",
		"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority}", 1)))
	for i := range 4 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	capture := func(at string) ([]pit, cqAt, string) {
		var page struct{ Items []pit }
		if code := s.call("GET", "/v1/workloads?limit=1000"+at, nil, &page); code != http.StatusOK {
			t.Fatalf("list%s: %d", at, code)
		}
		var cq cqAt
		if code := s.call("GET", "/v1/clusterqueues/cq"+strings.Replace(at, "&", "?", 1), nil, &cq); code != http.StatusOK {
			t.Fatalf("clusterqueue%s: %d", at, code)
		}
		var ex struct {
			Status     string   `json:"status"`
			Ahead      []string `json:"ahead"`
			AheadCount int      `json:"aheadCount"`
			Detail     struct{ Reason, Message string }
		}
		if code := s.call("GET", "/v1/workloads/ns/w3/explain"+strings.Replace(at, "&", "?", 1), nil, &ex); code != http.StatusOK {
			t.Fatalf("explain%s: %d", at, code)
		}
		return page.Items, cq, fmt.Sprintf("%s %v %d %s", ex.Status, ex.Ahead, ex.AheadCount, ex.Detail.Message)
	}
	t1 := clock0
	wls1, cq1, ex1 := capture("")
	if len(wls1) != 4 || cq1.Admitted != 2 || cq1.Pending != 2 {
		t.Fatalf("at t1: %d workloads, %+v", len(wls1), cq1)
	}
	// Later: everything below happens after t1.
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"1m"}`))
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/w0/finish", []byte(`{"succeeded":true}`))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w4"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/w3/priority", []byte(`{"priority":100}`))
	s.sync()
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("3")))
	s.sync()
	wls2, cq2, ex2 := capture("")

	at := "&at=" + t1.Format(time.RFC3339Nano)
	wlsAt, cqAt1, exAt := capture(at)
	if d := cmp.Diff(wls1, wlsAt); d != "" {
		t.Errorf("workloads at t1 (-captured,+replayed):\n%s", d)
	}
	if d := cmp.Diff(cq1, cqAt1); d != "" {
		t.Errorf("clusterqueue at t1 (-captured,+replayed):\n%s", d)
	}
	if ex1 != exAt {
		t.Errorf("explain at t1: replayed %q, captured %q", exAt, ex1)
	}
	// And now, as the projection says.
	now := "&at=" + clock0.Add(time.Minute).Format(time.RFC3339Nano)
	wlsNow, cqNow, exNow := capture(now)
	if d := cmp.Diff(wls2, wlsNow); d != "" {
		t.Errorf("workloads now (-projection,+replayed):\n%s", d)
	}
	if d := cmp.Diff(cq2, cqNow); d != "" {
		t.Errorf("clusterqueue now (-projection,+replayed):\n%s", d)
	}
	if ex2 != exNow {
		t.Errorf("explain now: replayed %q, projection %q", exNow, ex2)
	}
	if d := cmp.Diff(wls1, wls2); d == "" {
		t.Fatal("the run did not change anything after t1")
	}

	// Before the history: 410 naming the earliest time; bad input: 400.
	var errBody struct {
		Errors []struct{ Field, Message string } `json:"errors"`
	}
	if code := s.call("GET", "/v1/workloads?at=2025-12-31T00:00:00Z", nil, &errBody); code != http.StatusGone ||
		len(errBody.Errors) != 1 || errBody.Errors[0].Field != "at" || !strings.Contains(errBody.Errors[0].Message, clock0.Format(time.RFC3339)) {
		t.Errorf("before the history: %d %+v", code, errBody)
	}
	for _, bad := range []string{"yesterday", "2027-01-01T00:00:00Z"} {
		if code := s.call("GET", "/v1/clusterqueues/cq?at="+bad, nil, &errBody); code != http.StatusBadRequest || errBody.Errors[0].Field != "at" {
			t.Errorf("at=%s: %d %+v", bad, code, errBody)
		}
	}
	_ = json.Valid
}

// TestWhatIfOverRecordedHistory records a run on the manual clock (one
// 1-cpu queue; three 1-cpu workloads arriving at minute 1, each finished
// 10 minutes after its admission) and asks POST /v1/whatif for it with
// the queue unchanged (the recorded figures come back) and with 3 cpu.
// Recorded: admitted at 1, 11 and 21 minutes; the queue is busy 30 of the
// window's 31 minutes. With 3 cpu: all at minute 1, 3 cpu busy for 10.
func TestWhatIfOverRecordedHistory(t *testing.T) {
	s := startWith(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("1")))
	s.sync()
	advance := func(d string) {
		s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"`+d+`"}`))
	}
	advance("1m")
	for i := range 3 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	for i := range 3 {
		advance("10m")
		s.must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/workloads/ns/w%d/finish", i), []byte(`{"succeeded":true}`))
		s.sync()
	}
	type stats struct {
		Admitted        int     `json:"admitted"`
		MeanWaitSeconds float64 `json:"meanWaitSeconds"`
		P95WaitSeconds  float64 `json:"p95WaitSeconds"`
		Usage           []struct {
			Percent float64 `json:"percent"`
		} `json:"usage"`
		Preemptions int `json:"preemptions"`
	}
	type report struct {
		Arrivals int `json:"arrivals"`
		Queues   []struct {
			ClusterQueue string `json:"clusterQueue"`
			Old, New     stats
		} `json:"clusterQueues"`
		Moved []struct {
			Name         string   `json:"name"`
			DeltaSeconds *float64 `json:"deltaSeconds"`
		} `json:"moved"`
	}
	window := "?from=" + clock0.Format(time.RFC3339) + "&to=" + clock0.Add(31*time.Minute).Format(time.RFC3339)
	var same report
	if code := s.call("POST", "/v1/whatif"+window, []byte(oneQueue("1")), &same); code != http.StatusOK {
		t.Fatalf("whatif unchanged: %d", code)
	}
	// The creation times are the clock plus 0, 1 and 2 ms: waits 0,
	// 599.999 and 1199.998 s.
	recorded := stats{Admitted: 3, MeanWaitSeconds: 599.999, P95WaitSeconds: 1199.998, Usage: []struct {
		Percent float64 `json:"percent"`
	}{{Percent: 96.774}}}
	if len(same.Queues) != 1 || same.Arrivals != 3 {
		t.Fatalf("unchanged: %+v", same)
	}
	if d := cmp.Diff(recorded, same.Queues[0].Old); d != "" {
		t.Errorf("recorded (-want,+got):\n%s", d)
	}
	if d := cmp.Diff(recorded, same.Queues[0].New); d != "" {
		t.Errorf("unchanged replay (-want,+got):\n%s", d)
	}
	if len(same.Moved) != 0 {
		t.Errorf("unchanged replay moved %+v", same.Moved)
	}
	var more report
	if code := s.call("POST", "/v1/whatif"+window, []byte(oneQueue("3")), &more); code != http.StatusOK {
		t.Fatalf("whatif 3 cpu: %d", code)
	}
	want := stats{Admitted: 3, Usage: []struct {
		Percent float64 `json:"percent"`
	}{{Percent: 32.258}}}
	if d := cmp.Diff(want, more.Queues[0].New); d != "" {
		t.Errorf("3 cpu (-want,+got):\n%s", d)
	}
	if len(more.Moved) != 2 || more.Moved[0].Name != "w2" || *more.Moved[0].DeltaSeconds != -1200 ||
		more.Moved[1].Name != "w1" || *more.Moved[1].DeltaSeconds != -600 {
		t.Errorf("moved: %+v", more.Moved)
	}
	// No window, or one too long: 400 naming the parameter.
	var errBody struct {
		Errors []struct{ Field string } `json:"errors"`
	}
	for q, field := range map[string]string{"": "since", "?since=800h": "since", "?since=1h&from=" + clock0.Format(time.RFC3339): "since",
		"?from=" + clock0.Add(-800*time.Hour).Format(time.RFC3339) + "&to=" + clock0.Format(time.RFC3339): "from"} {
		if code := s.call("POST", "/v1/whatif"+q, []byte(oneQueue("3")), &errBody); code != http.StatusBadRequest ||
			len(errBody.Errors) != 1 || errBody.Errors[0].Field != field {
			t.Errorf("whatif%s: %d %+v, want 400 on %s", q, code, errBody, field)
		}
	}
}
