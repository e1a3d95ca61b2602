package metrics

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/retention"
)

func fr(f string, r corev1.ResourceName) quota.FlavorResource {
	return quota.FlavorResource{Flavor: f, Resource: r}
}

// everything registers every metric of the package and gives each a value.
func everything(t *testing.T) (*prometheus.Registry, *Admission) {
	reg := prometheus.NewPedanticRegistry()
	m := NewAdmission(reg)
	RegisterIngest(reg, func(context.Context) (Lags, error) { return Lags{Admission: 3, Projection: 4}, nil })
	m.SetLeading(true)
	m.Attempt(true, 0)
	m.QuotaReserved("cq", "ns", "lq", 0)
	m.Evicted("cq", "ns", "lq", engine.EvictedByDeactivation)
	m.Preempted("cq", "InClusterQueue")
	m.Applied()
	sm := NewSnapshot(reg, "admission")
	sm.Fallbacks.WithLabelValues("version").Inc()
	sm.Restores.Inc()
	sm.Writes.Inc()
	sm.Failures.Inc()
	sm.Seq.Set(7)
	sm.Bytes.Set(100)
	sm.Taken(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	two := int64(2000)
	m.SetStats(engine.Stats{
		ClusterQueues: []engine.ClusterQueueStats{
			{Name: "cq", Cohort: "co", Status: "active", PendingActive: 1, Reserving: 1,
				Quotas: []engine.QuotaStats{{FlavorResource: fr("rf", corev1.ResourceCPU), Nominal: 1500, BorrowingLimit: &two}},
				Usage:  quota.Usage{fr("rf", corev1.ResourceCPU): 500}},
			{Name: "gone", Status: "terminating", Reserving: 1, Usage: quota.Usage{fr("rf", corev1.ResourceMemory): 7}},
		},
		LocalQueues: []engine.LocalQueueStats{{Namespace: "ns", Name: "lq", ClusterQueue: "cq", Active: true, Reserving: 1,
			Usage: quota.Usage{fr("rf", corev1.ResourceCPU): 500}}},
		Unadmitted: map[engine.UnadmittedKey]int{{ClusterQueue: "cq", Namespace: "ns", LocalQueue: "lq", Cause: "WaitingForQuota"}: 2},
	})
	return reg, m
}

// describing is a Registerer that notes the name of every metric
// registered through it, from the collectors' descriptions: a vector
// without a child yet is described, but not gathered.
type describing struct {
	prometheus.Registerer
	names []string
}

// fqName is a Desc's name in its String form, the only place client_golang
// exposes it.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names = append(d.names, m[1])
		}
	}
	return d.Registerer.Register(c)
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// TestDocsListEveryMetric: docs/metrics.md lists every metric this package
// defines and those defined beside the roles that own them (retention's,
// registered as ingest registers them), and every kueue_ metric it lists is
// defined here.
func TestDocsListEveryMetric(t *testing.T) {
	reg, _ := everything(t)
	others := &describing{Registerer: reg}
	if _, err := retention.New(retention.Config{Registerer: others, Options: retention.Options{Retention: retention.DefaultRetention,
		HistoryRetention: retention.DefaultHistoryRetention, Interval: retention.DefaultInterval, Snapshots: retention.DefaultSnapshots}}); err != nil {
		t.Fatal(err)
	}
	if len(others.names) == 0 {
		t.Fatal("retention registered no metric")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	defined := others.names
	for _, f := range fams {
		if !slices.Contains(defined, f.GetName()) {
			defined = append(defined, f.GetName())
		}
	}
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:kueue|jetqueue)_[a-z_]+)` \\|").FindAllStringSubmatch(string(data), -1) {
		documented[m[1]] = true
	}
	for _, name := range defined {
		if !documented[name] {
			t.Errorf("%s is not in docs/metrics.md", name)
		}
	}
	for name := range documented {
		if strings.HasPrefix(name, "kueue_") && !slices.Contains(defined, name) {
			t.Errorf("docs/metrics.md lists %s, which libs/metrics does not define", name)
		}
	}
}

// TestExpositionLintsClean: client_golang's linter finds nothing to say.
func TestExpositionLintsClean(t *testing.T) {
	reg, _ := everything(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestGaugesInKueuesUnits: cpu in cores, unset limits 0, a terminating
// queue reports no pending series, and a standby exports no kueue_ metric.
func TestGaugesInKueuesUnits(t *testing.T) {
	reg, m := everything(t)
	want := `
# HELP kueue_cluster_queue_nominal_quota Reports the cluster_queue's resource nominal quota within all the flavors
# TYPE kueue_cluster_queue_nominal_quota gauge
kueue_cluster_queue_nominal_quota{cluster_queue="cq",cohort="co",flavor="rf",resource="cpu"} 1.5
# HELP kueue_cluster_queue_borrowing_limit Reports the cluster_queue's resource borrowing limit within all the flavors
# TYPE kueue_cluster_queue_borrowing_limit gauge
kueue_cluster_queue_borrowing_limit{cluster_queue="cq",cohort="co",flavor="rf",resource="cpu"} 2
# HELP kueue_cluster_queue_lending_limit Reports the cluster_queue's resource lending limit within all the flavors
# TYPE kueue_cluster_queue_lending_limit gauge
kueue_cluster_queue_lending_limit{cluster_queue="cq",cohort="co",flavor="rf",resource="cpu"} 0
# HELP kueue_cluster_queue_resource_usage Reports the cluster_queue's total resource usage within all the flavors
# TYPE kueue_cluster_queue_resource_usage gauge
kueue_cluster_queue_resource_usage{cluster_queue="cq",cohort="co",flavor="rf",resource="cpu"} 0.5
kueue_cluster_queue_resource_usage{cluster_queue="gone",cohort="",flavor="rf",resource="memory"} 7
# HELP kueue_evicted_workloads_total The number of evicted workloads per 'cluster_queue' and 'reason' (Preempted, PodsReadyTimeout, ClusterQueueStopped, LocalQueueStopped, Deactivated).
# TYPE kueue_evicted_workloads_total counter
kueue_evicted_workloads_total{cluster_queue="cq",reason="Deactivated"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_borrowing_limit",
		"kueue_cluster_queue_lending_limit", "kueue_cluster_queue_resource_usage", "kueue_evicted_workloads_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "kueue_pending_workloads"); n != 2 {
		t.Errorf("kueue_pending_workloads: %d series, want 2 (active and inadmissible of cq; none for the terminating queue)", n)
	}
	m.SetLeading(false)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "kueue_") {
			t.Errorf("a standby exports %s", f.GetName())
		}
	}
}
