package service

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// skipped counts the events in the log a service could not apply: a valid
// CloudEvent whose content is impossible (it does not decode, names what
// does not exist, or asks for more than the service will allocate). The
// rule every service follows: such an event is logged, counted, shown in
// /readyz and skipped; it never stops the service, so it cannot
// crash-loop it on every replay.
type skipped struct {
	once    sync.Once
	counter *prometheus.CounterVec
	mu      sync.Mutex
	n       uint64
	last    string
}

// Skip records an event at stream sequence seq, of type typ, that the
// service could not apply and skips. /readyz stays 200 (a poison event is
// no reason to stop serving) but says how many were skipped and the last.
func (r *Runtime) Skip(seq uint64, typ string, err error) {
	s := &r.skipped
	s.once.Do(func() {
		s.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetqueue_events_skipped_total",
			Help: "Events in the log this service could not apply and skipped, by event type.",
		}, []string{"type"})
		// On the base registry, which outlives a restart of main; a
		// Runtime made by hand (in tests) has only Registry.
		switch {
		case r.base != nil:
			r.base.MustRegister(s.counter)
		case r.Registry != nil:
			r.Registry.MustRegister(s.counter)
		}
	})
	if typ == "" {
		typ = "unknown"
	}
	s.counter.WithLabelValues(typ).Inc()
	if r.Log != nil {
		r.Log.Error("skipping an event that cannot be applied", zap.Uint64("seq", seq), zap.String("type", typ), zap.Error(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.last = fmt.Sprintf("seq %d (%s): %v", seq, typ, err)
}

// Skipped reports how many events were skipped and the last one, for
// /readyz and tests.
func (r *Runtime) Skipped() (uint64, string) {
	s := &r.skipped
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.last
}
