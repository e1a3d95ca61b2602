package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Read-your-writes. Every write answers with the stream sequence of what
// it published ("seq"); a query given that sequence (?minSeq=N, or the
// header JQ-Min-Seq: N) answers only once the projection holds the stream
// up to it, so it shows the write. The wait is bounded by maxReadWait
// (?minSeqTimeout= shortens or lengthens it up to that); then the answer
// is 504, naming how far the projection got.

// HeaderMinSeq is the header form of ?minSeq=.
const HeaderMinSeq = "JQ-Min-Seq"

// maxReadWait bounds a query's wait for the projection.
const maxReadWait = 30 * time.Second

// defaultReadWait is the wait without ?minSeqTimeout=.
const defaultReadWait = 10 * time.Second

// readAfter wraps a query: with a minimum sequence, it waits for the
// projection to reach it first.
func (s *Server) readAfter(h func(*http.Request) (int, any, error)) func(*http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		min, field, wait, err := minSeq(r)
		if err != nil || min == 0 {
			if err != nil {
				return 0, nil, err
			}
			return h(r)
		}
		if err := s.awaitProjection(r, min, field, wait); err != nil {
			return 0, nil, err
		}
		return h(r)
	}
}

// minSeq reads the minimum sequence (0: none), the parameter that gave it
// (minSeq or the header), and the wait.
func minSeq(r *http.Request) (uint64, string, time.Duration, error) {
	q := r.URL.Query()
	field := "minSeq"
	v, err := onlyOnce(q["minSeq"], "minSeq")
	if err != nil {
		return 0, "", 0, err
	}
	h, err := onlyOnce(r.Header.Values(HeaderMinSeq), HeaderMinSeq)
	if err != nil {
		return 0, "", 0, err
	}
	if h != "" {
		if v != "" && v != h {
			return 0, "", 0, fail(http.StatusBadRequest, "", "minSeq", "given twice, as ?minSeq= and as the header "+HeaderMinSeq+", with different values")
		}
		field, v = HeaderMinSeq, h
	}
	wait := defaultReadWait
	t, err := onlyOnce(q["minSeqTimeout"], "minSeqTimeout")
	if err != nil {
		return 0, "", 0, err
	}
	if t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 || d > maxReadWait {
			return 0, "", 0, fail(http.StatusBadRequest, "", "minSeqTimeout", fmt.Sprintf("must be a duration above 0 and up to %s", maxReadWait))
		}
		wait = d
	}
	if v == "" {
		return 0, "", wait, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, "", 0, fail(http.StatusBadRequest, "", field, "must be a stream sequence: a non-negative integer")
	}
	return n, field, wait, nil
}

// awaitProjection waits until the projection holds the stream up to min,
// woken by the projector's commits (see store.Progress), not by polling.
// A sequence beyond the stream's end was never answered to a write: it is
// refused at once rather than waited for.
func (s *Server) awaitProjection(r *http.Request, min uint64, field string, wait time.Duration) error {
	ctx := r.Context()
	if err := s.notBeyondLog(ctx, min, field); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	at, err := s.projected().Wait(wctx, min)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fail(http.StatusGatewayTimeout, "", field,
		fmt.Sprintf("the projection reached sequence %d, not %d, within %s; retry", at, min, wait))
}

// notBeyondLog refuses a sequence past the log's end: this server never
// gave it (a write's seq, a resourceVersion, a console event's seq), and
// waiting for the log to reach it would wait for other writes, perhaps
// forever.
func (s *Server) notBeyondLog(ctx context.Context, seq uint64, field string) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return err
	}
	if end := info.State.LastSeq; seq > end {
		return fail(http.StatusBadRequest, "", field, fmt.Sprintf("%d is beyond the stream's last sequence %d", seq, end))
	}
	return nil
}

// onlyOnce is the one value of a parameter or header: given twice, which
// one the client meant is a guess, so it is refused, naming field.
func onlyOnce(values []string, field string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return values[0], nil
	}
	return "", fail(http.StatusBadRequest, "", field, fmt.Sprintf("given %d times: give it once", len(values)))
}
