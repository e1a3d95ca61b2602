package chaos

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/events"
)

// TestAccount pins which answers a valid request may get: a submission
// retried through 503s, 504s or silence to a 2xx is fine; a 500 on the
// way, or any 4xx, is not the client's fault; a finish may get a 409 (the
// workload moved on) but not a 400; a submission whose last answer was a
// 503 is unresolved.
func TestAccount(t *testing.T) {
	sub := func(key string, status int) answer {
		return answer{method: "POST", path: "/v1/workloads", key: key, status: status}
	}
	finish := func(status int) answer {
		return answer{method: "POST", path: "/v1/workloads/chaos/w/finish", status: status}
	}
	type got struct {
		Submissions, Accepted, Retried int
		NotClientsFault, Unresolved    []int // statuses
	}
	for _, tc := range []struct {
		name    string
		answers []answer
		want    got
	}{
		{"accepted at once", []answer{sub("a", 202)}, got{Submissions: 1, Accepted: 1}},
		{"retried through 503, 504 and silence", []answer{sub("a", 503), sub("a", 0), sub("a", 504), sub("a", 202)},
			got{Submissions: 1, Accepted: 1, Retried: 1}},
		{"a 500 on the way counts though the retry succeeded", []answer{sub("a", 500), sub("a", 202)},
			got{Submissions: 1, Accepted: 1, Retried: 1, NotClientsFault: []int{500}}},
		{"a valid submission refused", []answer{sub("a", 503), sub("a", 409)},
			got{Submissions: 1, NotClientsFault: []int{409}}},
		{"a 400 for a valid submission", []answer{sub("a", 400)}, got{Submissions: 1, NotClientsFault: []int{400}}},
		{"still retrying when the load gave up", []answer{sub("a", 202), sub("b", 503)},
			got{Submissions: 2, Accepted: 1, Unresolved: []int{503}}},
		{"a finish of a workload that moved on", []answer{finish(409), finish(404)}, got{}},
		{"a finish refused as malformed", []answer{finish(400), finish(502)}, got{NotClientsFault: []int{400, 502}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := Account(tc.answers)
			g := got{Submissions: acc.Submissions, Accepted: acc.Accepted, Retried: acc.Retried}
			for _, a := range acc.NotClientsFault {
				g.NotClientsFault = append(g.NotClientsFault, a.status)
			}
			for _, a := range acc.Unresolved {
				g.Unresolved = append(g.Unresolved, a.status)
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("Account (-want,+got):\n%s", diff)
			}
			if acc.Bad() != (len(tc.want.NotClientsFault)+len(tc.want.Unresolved) > 0) {
				t.Errorf("Bad() = %t", acc.Bad())
			}
		})
	}
}

// TestRecoveries reads the first admission stored after each fault's
// from, not after its strike, and none when no admission follows.
func TestRecoveries(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	log := []Record{
		{Seq: 1, Event: events.Event{Type: events.QuotaReserved}, Stored: at(1)},
		{Seq: 2, Event: events.Event{Type: events.WorkloadFinished}, Stored: at(5)},
		{Seq: 3, Event: events.Event{Type: events.QuotaReserved}, Stored: at(6)},
		{Seq: 4, Event: events.Event{Type: events.QuotaReserved}, Stored: at(30)},
	}
	faults := []struck{
		{kind: faultStreamLeader, at: at(2), from: at(2)},
		{kind: faultQuorum, at: at(2), from: at(22)},
		{kind: faultStepdown, at: at(31), from: at(31)},
	}
	var got []string
	for _, r := range recoveries(faults, log) {
		if r.seen {
			got = append(got, r.kind+" "+r.next.String())
		} else {
			got = append(got, r.kind+" none")
		}
	}
	want := []string{faultStreamLeader + " 4s", faultQuorum + " 8s", faultStepdown + " none"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recoveries (-want,+got):\n%s", diff)
	}
}
