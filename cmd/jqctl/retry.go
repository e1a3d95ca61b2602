package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
)

// Retrying (docs/api.md, "Retries"). A request the server could not serve
// for now (503, and 502, 504 and 429) or that never got an answer (the
// connection refused, reset or timed out) is sent again until it gets a
// definite answer or retryBudget runs out: a JetStream leader change
// refuses every request for seconds, and a command that fails through it
// is a lost submission in a script. A 500 (a bug) and any other 4xx (the
// request's fault) are final. Every try of a submission carries the same
// Idempotency-Key, so that a try stored before its answer was lost is
// answered with the first answer rather than submitted twice.

// The waits between tries: retryFirst doubling up to retryMost, each
// between half and all of that (jitter, so that clients refused together
// do not come back together), and never less than the server's
// Retry-After.
const (
	retryFirst         = 100 * time.Millisecond
	retryMost          = 5 * time.Second
	defaultRetryBudget = 30 * time.Second
)

// envRetryTimeout overrides defaultRetryBudget; 0 turns retrying off.
const envRetryTimeout = "JQ_RETRY_TIMEOUT"

// retryPolicy is how long a request is tried for, with its clock, sleep
// and jitter injected so that tests need not wait.
type retryPolicy struct {
	// budget bounds the time from the first try to the start of the last.
	budget time.Duration
	now    func() time.Time
	// sleep waits d, or less if ctx ends first.
	sleep func(ctx context.Context, d time.Duration)
	// jitter picks a wait in [d/2, d].
	jitter func(d time.Duration) time.Duration
}

// defaultRetryPolicy is the real clock's, with the budget of
// JQ_RETRY_TIMEOUT if set.
func defaultRetryPolicy() (retryPolicy, error) {
	p := retryPolicy{budget: defaultRetryBudget, now: time.Now, sleep: sleepCtx,
		jitter: func(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }}
	if v := os.Getenv(envRetryTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return p, fmt.Errorf("%s=%q: want a duration such as 30s (0 turns retrying off)", envRetryTimeout, v)
		}
		p.budget = d
	}
	return p, nil
}

// retryable says whether a try's outcome may change if the request is sent
// again: an answer's status, or err when the try got no answer. after is
// the least wait the server asked for (Retry-After), 0 if none.
func retryable(status int, h http.Header, err error) (again bool, after time.Duration) {
	if err != nil {
		// bus.Transient knows the network's timeouts, refused and reset
		// connections; a connection the server closed without answering
		// ends in EOF.
		return bus.Transient(err) || errors.Is(err, io.EOF), 0
	}
	switch status {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true, retryAfter(h.Get("Retry-After"))
	}
	return false, 0
}

// retryAfter reads Retry-After: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// withRetries runs try until its outcome is final, the next wait would
// pass the budget, or ctx ends. try returns the answer's status and header, or the
// error of a try that got no answer; the last outcome is returned, with
// the number of tries.
func (p retryPolicy) withRetries(ctx context.Context, try func() (int, http.Header, error)) (status, tries int, err error) {
	start := p.now()
	wait := retryFirst
	for tries = 1; ; tries++ {
		var h http.Header
		status, h, err = try()
		again, after := retryable(status, h, err)
		if !again {
			return status, tries, err
		}
		d := max(p.jitter(wait), after)
		if p.now().Add(d).Sub(start) > p.budget {
			return status, tries, err
		}
		if p.sleep(ctx, d); ctx.Err() != nil {
			return status, tries, err
		}
		wait = min(2*wait, retryMost)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// submitPath is the submission route, the one write whose retries need an
// Idempotency-Key to be recognized.
const submitPath = "/v1/workloads"

// requestKey is the Idempotency-Key every try of one request carries: a
// fresh one for a submission with a document that has no metadata.name
// (generateName), "" otherwise. The server recognizes a named workload
// sent again with the same document without a key, and answers it 200
// as the first time even from another jqctl invocation; a key per
// invocation would turn that second invocation into a 409. A workload
// named by generateName has no such identity: without a key, a retry of a
// try whose answer was lost would create a second workload.
func requestKey(method, path string, body []byte, newKey func() string) string {
	p, _, _ := strings.Cut(path, "?")
	if method != http.MethodPost || p != submitPath {
		return ""
	}
	objs, err := api.Decode(body)
	if err != nil {
		// Refused whole by the server (400): nothing to deduplicate.
		return ""
	}
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetName() == "" {
			return newKey()
		}
	}
	return ""
}

// randomKey is a key no other request has: 128 random bits.
func randomKey() string { return "jqctl-" + crand.Text() }
