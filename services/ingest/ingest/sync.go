package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// The operator's waits: GET /v1/sync (every decider and the projection
// have processed the whole stream) and the manual clock's advance.

// advanceClock moves the shared manual clock (routed only with
// --manual-clock). Like the simulator's advance, it stops at
// every timer due on the way (the podsready service reports its next), and
// waits there until every service has acted at that instant.
func (s *Server) advanceClock(r *http.Request) (int, any, error) {
	b, err := s.body(r)
	if err != nil {
		return 0, nil, err
	}
	var in struct {
		Duration string `json:"duration"`
	}
	d, perr := time.Duration(0), strictJSON(b, &in)
	if perr == nil {
		d, perr = time.ParseDuration(in.Duration)
	}
	if perr != nil || d < 0 {
		return 0, nil, fail(http.StatusBadRequest, "", "duration", "want {\"duration\": \"6m\"}, a non-negative Go duration")
	}
	ctx, cancel := context.WithTimeout(r.Context(), advanceTimeout)
	defer cancel()
	target := s.clock.Now().Add(d)
	for {
		if err := s.processed(ctx); err != nil {
			return 0, nil, err
		}
		marks, err := bus.ReadMarks(ctx, s.js)
		if err != nil {
			return 0, nil, err
		}
		next := marks[timerService].Next
		now := s.clock.Now()
		if next == nil || next.After(target) || !next.After(now) {
			break
		}
		if _, err := s.clock.Advance(ctx, next.Sub(now)); err != nil {
			return 0, nil, err
		}
	}
	now, err := s.clock.Advance(ctx, target.Sub(s.clock.Now()))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"now": now}, nil
}

// sortedMarks lists the marks' names in order, so that what sync says it
// waits for does not change from one poll to the next.
func sortedMarks(marks map[string]bus.Mark) []string {
	names := make([]string, 0, len(marks))
	for k := range marks {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// deciders are the services whose reactions to an event are themselves
// events; timerService is the one that also acts on the clock.
var deciders = []string{"admission", "preemptor", timerService}

const timerService = "podsready"

// maxSyncTimeout is the longest ?timeout= of GET /v1/sync; advanceTimeout
// bounds one clock advance.
const (
	maxSyncTimeout = 5 * time.Minute
	advanceTimeout = 2 * time.Minute
)

// sync returns once every decider and the projection have processed every
// event published so far (and what they published in turn).
func (s *Server) sync(r *http.Request) (int, any, error) {
	timeout := 10 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxSyncTimeout {
			return 0, nil, fail(http.StatusBadRequest, "", "timeout", "must be a duration up to 5m")
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := s.processed(ctx); err != nil {
		return 0, nil, err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"seq": info.State.LastSeq}, nil
}

// processed waits until every decider that has ever reported (a service
// not deployed is not waited for), the scorer and the projection have
// processed the whole stream, and on the manual clock until the timer
// service has acted at the current time. On timeout it says what it was
// still waiting for.
func (s *Server) processed(ctx context.Context) error {
	for {
		waiting, err := s.waitingFor(ctx)
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			// The answer names what it waited for; why it could not be
			// read (an error that may name the database) goes to the log.
			return &httpError{status: http.StatusGatewayTimeout, cause: err,
				errs: []api.FieldError{{Message: "not every event was processed in time: waiting for " + waiting}}}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitingFor names what has not yet processed the whole stream, or
// returns "" when everything has; err is why a position could not be
// read, for the log only.
func (s *Server) waitingFor(ctx context.Context) (string, error) {
	// Progress first, then the stream's end: a consumer reports its
	// progress only after publishing what it decided on the way, so the
	// end read afterwards includes those decisions.
	marks, err := bus.ReadMarks(ctx, s.js)
	if err != nil {
		return "the progress marks (unreadable)", err
	}
	proj, err := s.store.LastSeq(ctx)
	if err != nil {
		return "the projection (unreadable)", err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return "the stream (unreadable)", err
	}
	end := info.State.LastSeq
	if proj < end {
		return fmt.Sprintf("the projection (at %d of %d)", proj, end), nil
	}
	if m := marks["admission"]; m.Seq < end {
		return fmt.Sprintf("admission (at %d of %d)", m.Seq, end), nil
	}
	// The other admission shards (bus.ProgressName), each deciding its
	// own cohort trees.
	for _, name := range sortedMarks(marks) {
		if m := marks[name]; strings.HasPrefix(name, "admission-") && m.Seq < end {
			return fmt.Sprintf("%s (at %d of %d)", name, m.Seq, end), nil
		}
	}
	for _, name := range deciders {
		if m, ok := marks[name]; ok && m.Seq < end {
			return fmt.Sprintf("%s (at %d of %d)", name, m.Seq, end), nil
		}
	}
	if m, ok := marks[timerService]; ok && s.clock != nil && (m.Clock == nil || m.Clock.Before(s.clock.Now())) {
		acted := "nothing yet"
		if m.Clock != nil {
			acted = m.Clock.Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("%s to act at %s (it has acted up to %s)", timerService, s.clock.Now().Format(time.RFC3339Nano), acted), nil
	}
	// The scorer reports through its durable consumer: nothing left to
	// deliver and nothing unacknowledged means every Placed is published
	// (it acknowledges after publishing).
	c, err := s.stream.Consumer(ctx, events.ScorerDurable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", nil
	}
	if err != nil {
		return "the scorer (unreadable)", err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return "the scorer (unreadable)", err
	}
	if ci.NumPending > 0 || ci.NumAckPending > 0 {
		return fmt.Sprintf("the scorer (%d to deliver, %d unacknowledged)", ci.NumPending, ci.NumAckPending), nil
	}
	return "", nil
}
