package admission

import (
	"context"

	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
)

// TestRetryInPlace: the loop asks again in place, and counts, only a
// request that changed nothing and failed for now; a lost lease, a
// failure no retry cures, and any other step's error (a publication whose
// fate is unknown) still start the loop over.
func TestRetryInPlace(t *testing.T) {
	for name, c := range map[string]struct {
		err   error
		retry bool
	}{
		"a fetch unanswered":           {requestError{"fetch", fmt.Errorf("follow: %w", context.DeadlineExceeded)}, true},
		"a standby's acquire, no one":  {requestError{"lease", nats.ErrNoResponders}, true},
		"a progress mark, no leader":   {requestError{"progress", &jetstream.APIError{ErrorCode: 10009, Code: 503}}, true},
		"a fetch refused for good":     {requestError{"fetch", &jetstream.APIError{ErrorCode: 10059, Code: 404}}, false},
		"the lease lost":               {requestError{"lease", fmt.Errorf("%w: %w", bus.ErrLeaseLost, context.DeadlineExceeded)}, false},
		"a publication unanswered":     {fmt.Errorf("publish: %w", context.DeadlineExceeded), false},
		"a request the caller gave up": {requestError{"fetch", context.Canceled}, false},
		"a replay asked for":           {fmt.Errorf("%w: x", errResync), false},
	} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := &Service{log: zap.NewNop(), m: metrics.NewAdmission(reg)}
			var b bus.Backoff
			if got := s.retry(context.Background(), c.err, &b); got != c.retry {
				t.Errorf("retry(%v) = %v, want %v", c.err, got, c.retry)
			}
			want := 0.0
			if c.retry {
				want = 1
			}
			if got := retried(t, reg); got != want {
				t.Errorf("jetqueue_admission_requests_retried_total = %v, want %v", got, want)
			}
		})
	}
}

func retried(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "jetqueue_admission_requests_retried_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestUnansweredPublicationIsReplayedInPlace: a decision whose
// publication went unanswered (a stream leader gone, the ack's wait over)
// may or may not be in the log, so the engine may be ahead of it: the
// loop replays the log under the lease (errResync), as for any
// contradiction, rather than failing the service, which re-joins the bus
// and takes the lease again. A failure no retry cures still fails it.
func TestUnansweredPublicationIsReplayedInPlace(t *testing.T) {
	s := &Service{log: zap.NewNop(), m: metrics.NewAdmission(nil)}
	for _, c := range []struct {
		err    error
		replay bool
	}{
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{fmt.Errorf("publish: %w", &jetstream.APIError{ErrorCode: 10054, Code: 400}), false},
	} {
		err := s.published(context.Background(), decision{}, events.Event{}, 0, c.err, false)
		if got := errors.Is(err, errResync); got != c.replay {
			t.Errorf("published(%v) = %v: replayed in place %v, want %v", c.err, err, got, c.replay)
		}
	}
}
