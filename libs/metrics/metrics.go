// Package metrics defines every Prometheus metric jetqueue exports beyond
// the Go and process collectors: Kueue's, under the names, types and
// labels Kueue gives them (kueue_…, sigs.k8s.io/kueue pkg/metrics), so
// that Kueue's dashboards and alerts work unchanged, and jetqueue's own
// (jetqueue_…). Services only observe into it; docs/metrics.md lists each
// metric and the service that exports it.
//
// Kueue's gauges are not set one by one: the admission service hands over
// a whole engine.Stats after each step and a scrape renders it, so a
// ClusterQueue or LocalQueue that is gone leaves no stale series.
package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// Kueue's label values.
const (
	ResultSuccess      = "success"
	ResultInadmissible = "inadmissible"
	StatusActive       = "active"
	StatusInadmissible = "inadmissible"
	// ReasonNoReservation is kueue_unadmitted_workloads' reason for a
	// workload without quota: the only one without admission checks.
	ReasonNoReservation = "NoReservation"
)

// Kueue's cluster_queue_status values, and local_queue_status' active.
var (
	cqStatuses = []string{"pending", "active", "terminating"}
	lqStatuses = []string{"True", "False", "Unknown"}
)

// waitBuckets are Kueue's buckets for its wait-time histograms: 1s, then
// 2.5s doubling 13 times (about 2.8 hours).
func waitBuckets() []float64 {
	return append([]float64{1}, prometheus.ExponentialBuckets(2.5, 2, 13)...)
}

// EvictionReason is the reason label Kueue's evicted_workloads_total
// gives a jetqueue eviction reason: Kueue names a deactivation
// "Deactivated" where its Evicted condition says InactiveWorkload.
func EvictionReason(r string) string {
	if r == engine.EvictedByDeactivation {
		return "Deactivated"
	}
	return r
}

// Quantity turns an amount in jetqueue's integer units into the float
// Kueue reports: cpu in cores (from milli-cpu), anything else as is.
func Quantity(r corev1.ResourceName, v int64) float64 {
	if r == corev1.ResourceCPU {
		return float64(v) / 1000
	}
	return float64(v)
}

// Admission holds the metrics of the admission service: Kueue's scheduler,
// queue-system and cache metrics, and its own progress.
type Admission struct {
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec

	quotaReserved, admitted         *prometheus.CounterVec
	quotaReservedWait, admittedWait *prometheus.HistogramVec
	lqQuotaReserved, lqAdmitted     *prometheus.CounterVec
	lqQuotaReservedWait, lqAdmWait  *prometheus.HistogramVec
	evicted, lqEvicted              *prometheus.CounterVec
	preempted                       *prometheus.CounterVec

	applied prometheus.Counter
	// refused counts decisions whose fenced publication was refused;
	// replays the replays of the log a decision in flight forced.
	refused *prometheus.CounterVec
	replays prometheus.Counter
	// retried counts requests to JetStream that failed for now and were
	// asked again in place, without restarting the loop.
	retried *prometheus.CounterVec

	// leading gates Kueue's metrics: every instance follows the log and
	// counts it, but only the lease holder exports them, so that Kueue's
	// queries, which sum over targets, count each workload once.
	leading atomic.Bool
	// shard is which admission shard this instance is (nil: the only one).
	shard atomic.Pointer[engine.Shard]
	stats atomic.Pointer[engine.Stats]
	g     gauges
}

// NewAdmission creates the admission service's metrics and registers them
// on r.
func NewAdmission(r prometheus.Registerer) *Admission {
	cq, lq := []string{"cluster_queue"}, []string{"name", "namespace"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kueue", Name: name, Help: help}, labels)
	}
	hist := func(name, help string, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kueue", Name: name, Help: help, Buckets: waitBuckets()}, labels)
	}
	m := &Admission{
		attempts: counter("admission_attempts_total", "The total number of attempts to admit workloads. Each admission attempt might try to admit more than one workload. "+
			"'result' is 'success' when at least one workload was admitted, 'inadmissible' when none was.", []string{"result"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kueue", Name: "admission_attempt_duration_seconds",
			Help: "The latency of an admission attempt, by 'result' (success: at least one workload was admitted; inadmissible: none was)."}, []string{"result"}),
		quotaReserved:       counter("quota_reserved_workloads_total", "The total number of quota reserved workloads per 'cluster_queue'", cq),
		admitted:            counter("admitted_workloads_total", "The total number of admitted workloads per 'cluster_queue'", cq),
		quotaReservedWait:   hist("quota_reserved_wait_time_seconds", "The time between a workload was created or requeued until it got quota reservation, per 'cluster_queue'", cq),
		admittedWait:        hist("admission_wait_time_seconds", "The time between a workload was created or requeued until admission, per 'cluster_queue'", cq),
		lqQuotaReserved:     counter("local_queue_quota_reserved_workloads_total", "The total number of quota reserved workloads per 'local_queue'", lq),
		lqAdmitted:          counter("local_queue_admitted_workloads_total", "The total number of admitted workloads per 'local_queue'", lq),
		lqQuotaReservedWait: hist("local_queue_quota_reserved_wait_time_seconds", "The time between a workload was created or requeued until it got quota reservation, per 'local_queue'", lq),
		lqAdmWait:           hist("local_queue_admission_wait_time_seconds", "The time between a workload was created or requeued until admission, per 'local_queue'", lq),
		evicted: counter("evicted_workloads_total", "The number of evicted workloads per 'cluster_queue' and 'reason' "+
			"(Preempted, PodsReadyTimeout, ClusterQueueStopped, LocalQueueStopped, Deactivated).", []string{"cluster_queue", "reason"}),
		lqEvicted: counter("local_queue_evicted_workloads_total", "The number of evicted workloads per 'local_queue' and 'reason'.",
			[]string{"name", "namespace", "reason"}),
		preempted: counter("preempted_workloads_total", "The number of preempted workloads per 'preempting_cluster_queue' and 'reason' "+
			"(InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing).", []string{"preempting_cluster_queue", "reason"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_admission_events_applied_total",
			Help: "Events of JQ_EVENTS this instance read and applied since it started; a replay of the log within the process does not count them again."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_admission_decisions_refused_total",
			Help: "Decisions whose publication JetStream refused because the workload's subject had moved since they were made, by 'type' (the decision's event type); each is made again on the new state."}, []string{"type"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_admission_log_replays_total",
			Help: "Times this instance replayed the log because the log contradicted a decision in flight."}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jetqueue_admission_requests_retried_total",
			Help: "Requests to JetStream of the admission loop that failed for now (no answer in time, no leader, no server) and were asked again in place, by 'request' (fetch, lease, progress)."}, []string{"request"}),
		g: newGauges(),
	}
	if r != nil {
		r.MustRegister(m.applied, m.refused, m.replays, m.retried, &leaderOnly{leading: &m.leading, owner: m.owner, inner: []prometheus.Collector{m.attempts, m.attemptDuration,
			m.quotaReserved, m.admitted, m.quotaReservedWait, m.admittedWait, m.lqQuotaReserved, m.lqAdmitted, m.lqQuotaReservedWait,
			m.lqAdmWait, m.evicted, m.lqEvicted, m.preempted, (*stateCollector)(m)}})
	}
	return m
}

// Retried counts a request to JetStream asked again in place.
func (m *Admission) Retried(request string) { m.retried.WithLabelValues(request).Inc() }

// SetLeading says whether this instance holds admission's lease.
func (m *Admission) SetLeading(ok bool) { m.leading.Store(ok) }

// SetShard says this instance is admission shard index of count. With
// more than one shard, every shard counts the whole log, so each exports
// Kueue's series only for what its own trees hold: a series labelled by
// a ClusterQueue (cluster_queue, preempting_cluster_queue) when the
// ClusterQueue's cohort tree is the shard's (engine.TreeOwner), one of a
// LocalQueue (name, namespace) when its ClusterQueue's tree is. Every
// shard reads the same log, so each series is exported by exactly one
// shard and a sum over shards counts each workload once; a series moves
// with its tree, carrying the whole log's count. admission_attempts_*,
// which count the shard's own cycles, are exported by every shard.
func (m *Admission) SetShard(index, count int) {
	m.shard.Store(&engine.Shard{Index: index, Count: count})
}

// owner decides which series this shard exports, from the last Stats
// (ClusterQueue → cohort, LocalQueue → ClusterQueue); nil exports all.
func (m *Admission) owner() *owner {
	sh := m.shard.Load()
	if sh == nil || sh.Count <= 1 {
		return nil
	}
	o := &owner{shard: *sh, cohorts: map[string]string{}, localQueues: map[[2]string]string{}}
	if st := m.stats.Load(); st != nil {
		for _, cq := range st.ClusterQueues {
			o.cohorts[cq.Name] = cq.Cohort
		}
		for _, lq := range st.LocalQueues {
			o.localQueues[[2]string{lq.Namespace, lq.Name}] = lq.ClusterQueue
		}
	}
	return o
}

// owner is one shard's share of Kueue's series. A ClusterQueue no longer
// configured is owned by its name (as a standalone one), a LocalQueue no
// longer configured by its namespace/name: the same on every shard.
type owner struct {
	shard       engine.Shard
	cohorts     map[string]string
	localQueues map[[2]string]string
}

func (o *owner) clusterQueue(cq string) bool {
	return engine.TreeOwner(o.cohorts[cq], cq, o.shard.Count) == o.shard.Index
}

func (o *owner) localQueue(namespace, name string) bool {
	if cq, ok := o.localQueues[[2]string{namespace, name}]; ok {
		return o.clusterQueue(cq)
	}
	return engine.TreeOwner("", namespace+"/"+name, o.shard.Count) == o.shard.Index
}

// owns reports whether this shard exports series m.
func (o *owner) owns(m prometheus.Metric) bool {
	var d dto.Metric
	if m.Write(&d) != nil {
		return true
	}
	var ns, name string
	lq := false
	for _, l := range d.Label {
		switch l.GetName() {
		case "cluster_queue", "preempting_cluster_queue":
			return o.clusterQueue(l.GetValue())
		case "namespace":
			ns, lq = l.GetValue(), true
		case "name":
			name, lq = l.GetValue(), true
		}
	}
	if lq {
		return o.localQueue(ns, name)
	}
	return true
}

// leaderOnly collects its collectors only while leading, and of those
// only the series this shard owns.
type leaderOnly struct {
	leading *atomic.Bool
	owner   func() *owner
	inner   []prometheus.Collector
}

func (l *leaderOnly) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range l.inner {
		c.Describe(ch)
	}
}

func (l *leaderOnly) Collect(ch chan<- prometheus.Metric) {
	if !l.leading.Load() {
		return
	}
	o := l.owner()
	for _, c := range l.inner {
		if o == nil {
			c.Collect(ch)
			continue
		}
		all := make(chan prometheus.Metric)
		go func() {
			c.Collect(all)
			close(all)
		}()
		for m := range all {
			if o.owns(m) {
				ch <- m
			}
		}
	}
}

// Attempt records one admission attempt (one scheduling cycle that took
// heads) and how long it took.
func (m *Admission) Attempt(admitted bool, took time.Duration) {
	result := ResultInadmissible
	if admitted {
		result = ResultSuccess
	}
	m.attempts.WithLabelValues(result).Inc()
	m.attemptDuration.WithLabelValues(result).Observe(took.Seconds())
}

// QuotaReserved records a workload's quota reservation in a ClusterQueue
// through a LocalQueue, and its wait since creation or its last eviction.
// Without admission checks a reservation is an admission, as in Kueue.
func (m *Admission) QuotaReserved(clusterQueue, namespace, localQueue string, wait time.Duration) {
	s := max(wait, 0).Seconds()
	m.quotaReserved.WithLabelValues(clusterQueue).Inc()
	m.admitted.WithLabelValues(clusterQueue).Inc()
	m.quotaReservedWait.WithLabelValues(clusterQueue).Observe(s)
	m.admittedWait.WithLabelValues(clusterQueue).Observe(s)
	m.lqQuotaReserved.WithLabelValues(localQueue, namespace).Inc()
	m.lqAdmitted.WithLabelValues(localQueue, namespace).Inc()
	m.lqQuotaReservedWait.WithLabelValues(localQueue, namespace).Observe(s)
	m.lqAdmWait.WithLabelValues(localQueue, namespace).Observe(s)
}

// Evicted records an eviction from a ClusterQueue; reason is jetqueue's
// (see EvictionReason).
func (m *Admission) Evicted(clusterQueue, namespace, localQueue, reason string) {
	r := EvictionReason(reason)
	m.evicted.WithLabelValues(clusterQueue, r).Inc()
	m.lqEvicted.WithLabelValues(localQueue, namespace, r).Inc()
}

// Preempted records one victim of a preemption requested for a workload
// of preemptingCQ, chosen on grounds kind.
func (m *Admission) Preempted(preemptingCQ, kind string) {
	m.preempted.WithLabelValues(preemptingCQ, kind).Inc()
}

// Refused counts a decision of type typ whose publication was refused.
func (m *Admission) Refused(typ string) { m.refused.WithLabelValues(typ).Inc() }

// Replayed counts a replay of the log forced by a decision in flight.
func (m *Admission) Replayed() { m.replays.Inc() }

// Applied counts one event applied to the engine.
func (m *Admission) Applied() { m.applied.Inc() }

// SetStats hands over the gauges' current values.
func (m *Admission) SetStats(st engine.Stats) { m.stats.Store(&st) }

// gauges are the descriptions of Kueue's gauges, rendered from Stats.
type gauges struct {
	pending, reserving, admittedActive, cqStatus       *prometheus.Desc
	reservation, usage, nominal, borrowing, lending    *prometheus.Desc
	lqPending, lqReserving, lqAdmittedActive, lqStatus *prometheus.Desc
	lqReservation, lqUsage, unadmitted, lqUnadmitted   *prometheus.Desc
}

func newGauges() gauges {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kueue_"+name, help, labels, nil)
	}
	cell := []string{"cohort", "cluster_queue", "flavor", "resource"}
	lqCell := []string{"name", "namespace", "flavor", "resource"}
	return gauges{
		pending: d("pending_workloads", "The number of pending workloads, per 'cluster_queue' and 'status' "+
			"(active: in the admission queue; inadmissible: parked after a failed attempt until something changes that could make them admissible).", "cluster_queue", "status"),
		reserving:      d("reserving_active_workloads", "The number of Workloads that are reserving quota, per 'cluster_queue'", "cluster_queue"),
		admittedActive: d("admitted_active_workloads", "The number of admitted Workloads that are active (unsuspended and not finished), per 'cluster_queue'", "cluster_queue"),
		cqStatus: d("cluster_queue_status", "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or 'terminating'). "+
			"For a ClusterQueue, the metric only reports a value of 1 for one of the statuses.", "cluster_queue", "status"),
		reservation: d("cluster_queue_resource_reservation", "Reports the cluster_queue's total resource reservation within all the flavors", cell...),
		usage:       d("cluster_queue_resource_usage", "Reports the cluster_queue's total resource usage within all the flavors", cell...),
		nominal:     d("cluster_queue_nominal_quota", "Reports the cluster_queue's resource nominal quota within all the flavors", cell...),
		borrowing:   d("cluster_queue_borrowing_limit", "Reports the cluster_queue's resource borrowing limit within all the flavors", cell...),
		lending:     d("cluster_queue_lending_limit", "Reports the cluster_queue's resource lending limit within all the flavors", cell...),
		lqPending: d("local_queue_pending_workloads", "The number of pending workloads, per 'local_queue' and 'status' (active or inadmissible).",
			"name", "namespace", "status"),
		lqReserving:      d("local_queue_reserving_active_workloads", "The number of Workloads that are reserving quota, per 'localQueue'", "name", "namespace"),
		lqAdmittedActive: d("local_queue_admitted_active_workloads", "The number of admitted Workloads that are active (unsuspended and not finished), per 'localQueue'", "name", "namespace"),
		lqStatus: d("local_queue_status", "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or 'Unknown'). "+
			"For a LocalQueue, the metric only reports a value of 1 for one of the statuses.", "name", "namespace", "active"),
		lqReservation: d("local_queue_resource_reservation", "Reports the localQueue's total resource reservation within all the flavors", lqCell...),
		lqUsage:       d("local_queue_resource_usage", "Reports the localQueue's total resource usage within all the flavors", lqCell...),
		unadmitted: d("unadmitted_workloads", "The number of workloads without quota reservation, per 'cluster_queue', 'reason' and 'underlying_cause' "+
			"(PendingEvaluation, Misconfigured, ExceedsMaxQuota, Suspended, WaitingForPodsReady, WaitingForQuota, Deactivated).",
			"cluster_queue", "reason", "underlying_cause"),
		lqUnadmitted: d("local_queue_unadmitted_workloads", "The number of workloads without quota reservation, per 'local_queue', 'reason' and 'underlying_cause'.",
			"name", "namespace", "cluster_queue", "reason", "underlying_cause"),
	}
}

// stateCollector renders the gauges from the last Stats handed over.
type stateCollector Admission

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	g := c.g
	for _, d := range []*prometheus.Desc{g.pending, g.reserving, g.admittedActive, g.cqStatus, g.reservation, g.usage, g.nominal,
		g.borrowing, g.lending, g.lqPending, g.lqReserving, g.lqAdmittedActive, g.lqStatus, g.lqReservation, g.lqUsage,
		g.unadmitted, g.lqUnadmitted} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats.Load()
	if st == nil {
		return
	}
	g := c.g
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, cq := range st.ClusterQueues {
		if cq.Status != "terminating" {
			gauge(g.pending, float64(cq.PendingActive), cq.Name, StatusActive)
			gauge(g.pending, float64(cq.PendingInadmissible), cq.Name, StatusInadmissible)
		}
		gauge(g.reserving, float64(cq.Reserving), cq.Name)
		gauge(g.admittedActive, float64(cq.Reserving), cq.Name)
		for _, s := range cqStatuses {
			gauge(g.cqStatus, b2f(s == cq.Status), cq.Name, s)
		}
		// Like Kueue's status.flavorsReservation, every cell of the spec
		// is reported, at 0 when unused; a limit that is not set reads 0.
		inSpec := map[quota.FlavorResource]bool{}
		for _, q := range cq.Quotas {
			inSpec[q.FlavorResource] = true
			cell := []string{cq.Cohort, cq.Name, q.Flavor, string(q.Resource)}
			gauge(g.nominal, Quantity(q.Resource, q.Nominal), cell...)
			gauge(g.borrowing, Quantity(q.Resource, deref(q.BorrowingLimit)), cell...)
			gauge(g.lending, Quantity(q.Resource, deref(q.Lending)), cell...)
			gauge(g.reservation, Quantity(q.Resource, cq.Usage[q.FlavorResource]), cell...)
			gauge(g.usage, Quantity(q.Resource, cq.Usage[q.FlavorResource]), cell...)
		}
		for _, fr := range cq.Usage.Keys() {
			if inSpec[fr] {
				continue
			}
			cell := []string{cq.Cohort, cq.Name, fr.Flavor, string(fr.Resource)}
			gauge(g.reservation, Quantity(fr.Resource, cq.Usage[fr]), cell...)
			gauge(g.usage, Quantity(fr.Resource, cq.Usage[fr]), cell...)
		}
	}
	for _, lq := range st.LocalQueues {
		gauge(g.lqPending, float64(lq.PendingActive), lq.Name, lq.Namespace, StatusActive)
		gauge(g.lqPending, float64(lq.PendingInadmissible), lq.Name, lq.Namespace, StatusInadmissible)
		gauge(g.lqReserving, float64(lq.Reserving), lq.Name, lq.Namespace)
		gauge(g.lqAdmittedActive, float64(lq.Reserving), lq.Name, lq.Namespace)
		active := "False"
		if lq.Active {
			active = "True"
		}
		for _, s := range lqStatuses {
			gauge(g.lqStatus, b2f(s == active), lq.Name, lq.Namespace, s)
		}
		for _, fr := range lq.Usage.Keys() {
			gauge(g.lqReservation, Quantity(fr.Resource, lq.Usage[fr]), lq.Name, lq.Namespace, fr.Flavor, string(fr.Resource))
			gauge(g.lqUsage, Quantity(fr.Resource, lq.Usage[fr]), lq.Name, lq.Namespace, fr.Flavor, string(fr.Resource))
		}
	}
	byCQ := map[[2]string]int{}
	for k, n := range st.Unadmitted {
		byCQ[[2]string{k.ClusterQueue, k.Cause}] += n
		gauge(g.lqUnadmitted, float64(n), k.LocalQueue, k.Namespace, k.ClusterQueue, ReasonNoReservation, k.Cause)
	}
	for k, n := range byCQ {
		gauge(g.unadmitted, float64(n), k[0], ReasonNoReservation, k[1])
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// Lags are how far behind the end of JQ_EVENTS admission and the
// projection are, in events.
type Lags struct {
	Admission, Projection uint64
}

// RegisterIngest registers the ingest service's gauges on r: the lags are
// read at each scrape (within 2s; a scrape that cannot read them leaves
// them out).
func RegisterIngest(r prometheus.Registerer, read func(ctx context.Context) (Lags, error)) {
	r.MustRegister(&lagCollector{read: read,
		admission: prometheus.NewDesc("jetqueue_admission_lag_events",
			"Events of JQ_EVENTS admission has not processed yet; ingest answers 503 to submissions while it exceeds --max-admission-lag.", nil, nil),
		projection: prometheus.NewDesc("jetqueue_projection_lag_events",
			"Events of JQ_EVENTS the PostgreSQL projection does not hold yet (what queries wait for under minSeq).", nil, nil)})
}

type lagCollector struct {
	read                  func(ctx context.Context) (Lags, error)
	admission, projection *prometheus.Desc
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.admission; ch <- c.projection }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := c.read(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.admission, prometheus.GaugeValue, float64(l.Admission))
	ch <- prometheus.MustNewConstMetric(c.projection, prometheus.GaugeValue, float64(l.Projection))
}
