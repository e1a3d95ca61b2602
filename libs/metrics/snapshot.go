package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot are the snapshot metrics of one decider (libs/snapshot), each
// labelled with the service: admission, podsready, scorer or kube-bridge.
type Snapshot struct {
	// Fallbacks counts snapshots found but not used, by reason (the
	// service replayed the whole log instead).
	Fallbacks *prometheus.CounterVec
	Restores  prometheus.Counter
	Writes    prometheus.Counter
	Failures  prometheus.Counter
	Seq       prometheus.Gauge
	Bytes     prometheus.Gauge
	// RestoreSeconds is how long the last restore took, by phase: load
	// (check, download, decompress) and decode (the decider's state).
	RestoreSeconds *prometheus.GaugeVec
}

// NewSnapshot registers a service's snapshot metrics on r (nil: none). A
// service whose main restarts in the process registers them again on a
// fresh registry; one already registered on r is kept.
func NewSnapshot(r prometheus.Registerer, service string) *Snapshot {
	l := prometheus.Labels{"service": service}
	m := &Snapshot{
		Fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_snapshot_fallbacks_total", ConstLabels: l,
			Help: "Snapshots found in JQ_SNAPSHOTS but not used (the service replayed the whole log instead), by reason."}, []string{"reason"}),
		Restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_snapshot_restores_total", ConstLabels: l,
			Help: "Starts that restored a snapshot and replayed only the log after it."}),
		Writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_snapshot_writes_total", ConstLabels: l,
			Help: "Snapshots written to JQ_SNAPSHOTS."}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_snapshot_write_failures_total", ConstLabels: l,
			Help: "Snapshots that could not be taken or written."}),
		Seq: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetqueue_snapshot_seq", ConstLabels: l,
			Help: "The JQ_EVENTS sequence of the newest snapshot this instance wrote or restored."}),
		Bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetqueue_snapshot_bytes", ConstLabels: l,
			Help: "Compressed size in bytes of the newest snapshot this instance wrote or restored."}),
		RestoreSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jetqueue_snapshot_restore_seconds", ConstLabels: l,
			Help: "How long this instance's last snapshot restore took, by phase: load (check, download, decompress), decode (rebuild the state)."}, []string{"phase"}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.Fallbacks, m.Restores, m.Writes, m.Failures, m.Seq, m.Bytes, m.RestoreSeconds} {
			if err := r.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					panic(err)
				}
			}
		}
	}
	return m
}
