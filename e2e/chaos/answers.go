package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// answer is one answer the load's client got (status 0: none, a
// timeout or a refused connection).
type answer struct {
	at           time.Time
	method, path string
	key          string // the Idempotency-Key of a submission
	status       int
	body         string
}

// ledger keeps every answer the load's client got, so that each one a
// client would have seen is accounted for, not only those the retries
// ended with.
type ledger struct {
	mu      sync.Mutex
	answers []answer
}

// hear is the load's onAnswer.
func (lg *ledger) hear(method, path string, header map[string]string, status int, body []byte) {
	a := answer{at: time.Now(), method: method, path: path, key: header["Idempotency-Key"], status: status}
	if status < 200 || status >= 300 {
		a.body = string(body)
		if len(a.body) > 300 {
			a.body = a.body[:300] + "…"
		}
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.answers = append(lg.answers, a)
}

func (lg *ledger) all() []answer {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return slices.Clone(lg.answers)
}

// isSubmission tells a submission from the other requests of the load.
func (a answer) isSubmission() bool { return a.method == http.MethodPost && a.path == "/v1/workloads" }

// retriable is an answer a client is told to try again after: 503
// (with Retry-After), 504, or none at all.
func retriable(status int) bool {
	return status == 0 || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// stateful is a 4xx that a finish or a priority change can get for a
// valid request because of the workload's state, which moves under the
// load (preempted, finished, deleted meanwhile).
func stateful(status int) bool {
	return status == http.StatusNotFound || status == http.StatusConflict || status == http.StatusPreconditionFailed
}

// Accounting is what became of every request the load sent, as its
// client saw it.
type Accounting struct {
	// Submissions is how many distinct submissions were sent; Accepted
	// how many ended 2xx; Retried how many of those got another answer
	// (or none) first.
	Submissions, Accepted, Retried int
	// Statuses counts every answer by request kind and status
	// ("submit 503", "finish 409", "submit timeout").
	Statuses map[string]int
	// NotClientsFault are the refusals a valid request must never get: a
	// 4xx for a submission (every one the load sends is valid), a 400,
	// 401, 403 or 422 for anything else, and any 5xx but 503 and 504.
	NotClientsFault []answer
	// Unresolved are submissions whose last answer was still retriable
	// when the load gave up on them: a client would still be waiting.
	Unresolved []answer
}

// Account goes through every answer of the ledger.
func Account(answers []answer) Accounting {
	acc := Accounting{Statuses: map[string]int{}}
	last := map[string]answer{}
	retried := map[string]bool{}
	for _, a := range answers {
		kind := requestKind(a)
		status := fmt.Sprint(a.status)
		if a.status == 0 {
			status = "timeout"
		}
		acc.Statuses[kind+" "+status]++
		ok := a.status >= 200 && a.status < 300
		switch {
		case ok, retriable(a.status):
		case a.isSubmission() && a.status < 500:
			acc.NotClientsFault = append(acc.NotClientsFault, a)
		case a.status >= 500, !stateful(a.status):
			acc.NotClientsFault = append(acc.NotClientsFault, a)
		}
		if a.isSubmission() {
			if !ok {
				retried[a.key] = true
			}
			last[a.key] = a
		}
	}
	acc.Submissions = len(last)
	for _, k := range slices.Sorted(maps.Keys(last)) {
		a := last[k]
		switch {
		case a.status >= 200 && a.status < 300:
			acc.Accepted++
			if retried[k] {
				acc.Retried++
			}
		case retriable(a.status):
			acc.Unresolved = append(acc.Unresolved, a)
		}
	}
	return acc
}

func requestKind(a answer) string {
	switch {
	case a.isSubmission():
		return "submit"
	case strings.HasSuffix(a.path, "/finish"):
		return "finish"
	case strings.HasSuffix(a.path, "/priority"):
		return "priority"
	case strings.HasPrefix(a.path, "/v1/sync"):
		return "sync"
	case strings.HasPrefix(a.path, "/v1/workloads"):
		return "list"
	}
	return strings.ToLower(a.method) + " " + a.path
}

// Bad reports whether a client saw what it must not.
func (acc Accounting) Bad() bool { return len(acc.NotClientsFault)+len(acc.Unresolved) > 0 }

// Summary is the accounting's line of the run's summary.
func (acc Accounting) Summary() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(acc.Statuses)) {
		if !strings.HasSuffix(k, " 200") && !strings.HasSuffix(k, " 202") {
			parts = append(parts, fmt.Sprintf("%s=%d", k, acc.Statuses[k]))
		}
	}
	return fmt.Sprintf("submissions=%d accepted=%d accepted-after-retry=%d refusals-not-the-clients-fault=%d unresolved=%d non-2xx: %s",
		acc.Submissions, acc.Accepted, acc.Retried, len(acc.NotClientsFault), len(acc.Unresolved), strings.Join(parts, " "))
}

// requestID is the id a 5xx answer names, under which ingest logged the
// cause.
func (a answer) requestID() string {
	var body struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal([]byte(a.body), &body)
	return body.RequestID
}

func (a answer) String() string {
	status := fmt.Sprint(a.status)
	if a.status == 0 {
		status = "no answer"
	}
	return fmt.Sprintf("%s %s %s (key %q) at %s: %s %s", requestKind(a), a.method, a.path, a.key, a.at.Format("15:04:05.000"), status, a.body)
}
