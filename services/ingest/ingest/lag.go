package ingest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/metrics"
)

// lagGate refuses submissions while admission is too far behind the
// stream: JetStream would accept them without limit, and latency would
// grow without bound. The lag is read at most every 100ms, by one request
// while the others go on with the lag read before (a read takes round
// trips to JetStream, which no submission should wait for but the one).
type lagGate struct {
	mu         sync.Mutex
	checked    time.Time
	lag        uint64
	refreshing bool
}

func (s *Server) admissionLag(ctx context.Context) (uint64, error) {
	g := &s.gate
	g.mu.Lock()
	if !g.checked.IsZero() && (g.refreshing || time.Since(g.checked) < 100*time.Millisecond) {
		defer g.mu.Unlock()
		return g.lag, nil
	}
	g.refreshing = true
	g.mu.Unlock()
	lag, err := s.readAdmissionLag(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshing = false
	if err != nil {
		return 0, err
	}
	g.lag, g.checked = lag, time.Now()
	return lag, nil
}

// readAdmissionLag reads how many events admission has yet to read.
func (s *Server) readAdmissionLag(ctx context.Context) (uint64, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	// The slowest admission shard is admission's lag.
	marks, err := bus.ReadMarks(ctx, s.js)
	if err != nil {
		return 0, err
	}
	done := marks["admission"].Seq
	for name, m := range marks {
		if strings.HasPrefix(name, "admission-") {
			done = min(done, m.Seq)
		}
	}
	if info.State.LastSeq > done {
		return info.State.LastSeq - done, nil
	}
	return 0, nil
}

// admit answers 503 with Retry-After when admission lags by more than the
// configured number of events.
func (s *Server) admit(ctx context.Context) error {
	if s.cfg.MaxLag == 0 {
		return nil
	}
	lag, err := s.admissionLag(ctx)
	if err != nil {
		return err
	}
	if lag > s.cfg.MaxLag {
		return fail(http.StatusServiceUnavailable, "", "", "admission is behind; retry later")
	}
	return nil
}

// lags reads admission's and the projection's distance from the end of
// the stream, for the metrics.
func (s *Server) lags(ctx context.Context) (metrics.Lags, error) {
	adm, err := s.admissionLag(ctx)
	if err != nil {
		return metrics.Lags{}, err
	}
	proj, err := s.store.LastSeq(ctx)
	if err != nil {
		return metrics.Lags{}, err
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return metrics.Lags{}, err
	}
	l := metrics.Lags{Admission: adm}
	if info.State.LastSeq > proj {
		l.Projection = info.State.LastSeq - proj
	}
	return l, nil
}
