package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/retention"
)

// TestPointInTimeAfterPurge runs retention at its most aggressive (1 ms)
// and asks ?at= of the log after a purge has really removed events (the
// superseded ClusterQueue version, an expired and a deleted workload's
// histories): at T2, an instant after every purged event, the answers
// equal the live ones captured at T2 (and the whole log's ?at=T2 answers
// captured before the purge); at T1, when the purged ClusterQueue
// version was current, the answer is 410 naming the earliest time
// answerable, which answers. What-if's window is held to the same rule.
func TestPointInTimeAfterPurge(t *testing.T) {
	snapshots := []string{"admission-0", "podsready-0"}
	s := startOpts(t, false, &retention.Options{Retention: time.Millisecond, HistoryRetention: time.Hour,
		Interval: 50 * time.Millisecond, Snapshots: snapshots, BatchSettle: time.Millisecond})
	apply := func(cpu string) {
		req, _ := http.NewRequest("POST", s.base+"/v1/apply", bytes.NewReader(retentionConfig(cpu)))
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("apply: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	// T1: the ClusterQueue has 3 cpu; it gets 4 after, and the version of
	// 3 is purged.
	apply("3")
	s.sync()
	time.Sleep(20 * time.Millisecond)
	t1 := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	apply("4")
	for i := range 6 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU(fmt.Sprintf("w%d", i)))
	}
	s.sync()
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w0/finish", nil)
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/team/w5", nil)
	s.waitFor("w0 expired", func() bool { return s.lastType("w0") == events.WorkloadExpired })
	s.sync()
	// A live workload last: the log's last event before T2 is kept.
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("w6"))
	s.sync()
	time.Sleep(20 * time.Millisecond)
	t2 := time.Now().UTC()

	type answers struct {
		wls []pit
		cq  cqAt
		ex  string
	}
	capture := func(at time.Time) (answers, int) {
		q := ""
		if !at.IsZero() {
			q = "at=" + url.QueryEscape(at.Format(time.RFC3339Nano))
		}
		var a answers
		var page struct{ Items []pit }
		if code := s.call("GET", "/v1/workloads?limit=1000&"+q, nil, &page); code != http.StatusOK {
			return a, code
		}
		a.wls = page.Items
		if code := s.call("GET", "/v1/clusterqueues/cq?"+q, nil, &a.cq); code != http.StatusOK {
			t.Fatalf("clusterqueue %s: %d", q, code)
		}
		var ex struct {
			Status     string   `json:"status"`
			Ahead      []string `json:"ahead"`
			AheadCount int      `json:"aheadCount"`
			Detail     struct{ Reason, Message string }
		}
		if code := s.call("GET", "/v1/workloads/team/w6/explain?eta=false&"+q, nil, &ex); code != http.StatusOK {
			t.Fatalf("explain %s: %d", q, code)
		}
		a.ex = fmt.Sprintf("%s %v %d %s", ex.Status, ex.Ahead, ex.AheadCount, ex.Detail.Message)
		return a, http.StatusOK
	}
	live, _ := capture(time.Time{})
	// The projection keeps the expired w0 (finished); the log's state at
	// T2 has forgotten it, as every decider has.
	var liveWls []pit
	for _, w := range live.wls {
		if w.Name != "w0" && w.Name != "w5" {
			liveWls = append(liveWls, w)
		}
	}
	live.wls = liveWls
	whole, code := capture(t2)
	if code != http.StatusOK {
		t.Fatalf("at T2 from the whole log: %d", code)
	}
	opts := cmp.AllowUnexported(answers{})
	if d := cmp.Diff(live, whole, opts); d != "" {
		t.Fatalf("at T2 from the whole log (-live,+replayed):\n%s", d)
	}
	if len(live.wls) != 5 || live.cq.Admitted != 4 || live.cq.Pending != 1 {
		t.Fatalf("live at T2: %d workloads, %+v", len(live.wls), live.cq)
	}

	// The purge, with the deciders' snapshots at the log's end.
	s.putSnapshots(snapshots, s.streamState().LastSeq)
	s.waitFor("ended histories and the superseded version purged", func() bool {
		return s.subjectCount(events.WorkloadSubject("team", "w0")) == 0 && s.subjectCount(events.WorkloadSubject("team", "w5")) == 0 &&
			s.subjectCount(events.ConfigSubject("ClusterQueue", "", "cq")) == 1
	})
	// Life goes on after T2.
	s.must(http.StatusAccepted, "POST", "/v1/workloads/team/w1/finish", nil)
	s.must(http.StatusAccepted, "POST", "/v1/workloads", oneCPU("w7"))
	s.sync()
	if st := s.streamState(); st.Msgs == st.LastSeq-st.FirstSeq+1 {
		t.Fatalf("the log has no gap: %+v", st)
	}

	purged, code := capture(t2)
	if code != http.StatusOK {
		t.Fatalf("at T2 after the purge: %d", code)
	}
	if d := cmp.Diff(live, purged, opts); d != "" {
		t.Errorf("at T2 from the purged log (-live at T2,+replayed):\n%s", d)
	}

	// T1: the purged version of 3 cpu was current; 410 naming the
	// earliest time answerable, after T1 and at or before T2.
	var errBody struct {
		Errors []struct{ Field, Message string } `json:"errors"`
	}
	for _, path := range []string{"/v1/workloads?at=", "/v1/clusterqueues/cq?at=", "/v1/workloads/team/w1/explain?at="} {
		if code := s.call("GET", path+url.QueryEscape(t1.Format(time.RFC3339Nano)), nil, &errBody); code != http.StatusGone ||
			len(errBody.Errors) != 1 || errBody.Errors[0].Field != "at" {
			t.Fatalf("%s T1: %d %+v, want 410 naming at", path, code, errBody)
		}
	}
	m := regexp.MustCompile(`earliest time answerable after them is (\S+)$`).FindStringSubmatch(errBody.Errors[0].Message)
	if m == nil {
		t.Fatalf("the 410 does not name the earliest time answerable: %q", errBody.Errors[0].Message)
	}
	earliest, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil || !earliest.After(t1) || earliest.After(t2) {
		t.Fatalf("earliest time answerable %s (%v): want after T1 %s, at or before T2 %s", m[1], err, t1, t2)
	}
	if _, code := capture(earliest); code != http.StatusOK {
		t.Errorf("at the earliest time answerable %s: %d", earliest, code)
	}

	// What-if: a window from T1 is refused; from T2 it runs.
	whatIf := func(from time.Time) int {
		q := url.Values{"from": {from.Format(time.RFC3339Nano)}, "to": {time.Now().UTC().Format(time.RFC3339Nano)}}
		req, _ := http.NewRequest("POST", s.base+"/v1/whatif?"+q.Encode(), bytes.NewReader(retentionConfig("5")))
		req.Header.Set("Content-Type", "application/yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := whatIf(t1); code != http.StatusGone {
		t.Errorf("what-if from T1: %d, want 410", code)
	}
	if code := whatIf(t2); code != http.StatusOK {
		t.Errorf("what-if from T2: %d, want 200", code)
	}
}
