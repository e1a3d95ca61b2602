package metrics

import (
	"errors"
	"sync"
	"time"

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
	// CompactionRest is the time compactions slept between pieces of
	// their work, so that they take a share of a core (admission's
	// leader; libs/snapshot.Pacer).
	CompactionRest prometheus.Counter
	// Age is jetqueue_snapshot_age_seconds: at each scrape, the seconds
	// since the newest snapshot this instance wrote or restored was
	// written (Taken), by Age.Now; absent before the first.
	Age *SnapshotAge
}

// Taken records when the newest snapshot this instance wrote or restored
// was written: a write passes the time it wrote, a restore the restored
// object's (so a restart does not make an old snapshot look new).
func (m *Snapshot) Taken(at time.Time) {
	m.Age.mu.Lock()
	defer m.Age.mu.Unlock()
	m.Age.at = at
}

// SnapshotAge is the collector of jetqueue_snapshot_age_seconds: an age
// grows between snapshots, so it is computed when scraped.
type SnapshotAge struct {
	desc *prometheus.Desc
	// Now is the clock of a scrape; nil means time.Now.
	Now func() time.Time
	mu  sync.Mutex
	at  time.Time
}

func (a *SnapshotAge) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a *SnapshotAge) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	at := a.at
	a.mu.Unlock()
	if at.IsZero() {
		return
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, max(now().Sub(at).Seconds(), 0))
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
		CompactionRest: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_snapshot_compaction_rest_seconds_total", ConstLabels: l,
			Help: "Seconds compactions slept between pieces of their work, so that they take a share of a core."}),
		Age: &SnapshotAge{desc: prometheus.NewDesc("jetqueue_snapshot_age_seconds",
			"Seconds since the newest snapshot this instance wrote or restored was taken.", nil, l)},
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.Fallbacks, m.Restores, m.Writes, m.Failures, m.Seq, m.Bytes, m.RestoreSeconds, m.CompactionRest, m.Age} {
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
