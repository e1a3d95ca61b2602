package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jetqueue/jetqueue/libs/events"
)

// metricsWorld is one cohort's ClusterQueue with 2.5 cpu (nominal), a
// borrowing and a lending limit, preempting lower priorities within
// itself, and two priority classes.
const metricsWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: co
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: rf
      resources:
      - {name: cpu, nominalQuota: 2500m, borrowingLimit: "1", lendingLimit: 500m}
      - {name: memory, nominalQuota: 1Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
`

func priorityWorkload(name, class string) []byte {
	priority := map[string]int{"low": 10, "high": 1000}[class]
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
 "spec":{"queueName":"lq","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","priorityClassName":%q,"priority":%d,
 "podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"100Mi"}}}]}}}]}}`, name, class, priority)
}

// scrape reads a service's /metrics, lints the exposition with
// client_golang's promlint, and returns the families by name.
func (s *system) scrape(service string) map[string]*dto.MetricFamily {
	s.t.Helper()
	s.adminMu.Lock()
	addr := s.admin[service]
	s.adminMu.Unlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		s.t.Fatalf("%s: lint: %v", service, err)
	}
	for _, p := range problems {
		s.t.Errorf("%s: lint: %s: %s", service, p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("%s: parse: %v", service, err)
	}
	return fams
}

// value is the sample of family name whose labels are exactly labels
// ("k=v" pairs, in any order); ok is false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		var got []string
		for _, l := range m.Label {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(labels))) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestKueueMetricsMatchTheLog runs a preemption and checks Kueue's metrics
// against what is computed without them: counters against the events of
// the log, gauges against the query API and the applied YAML.
func TestKueueMetricsMatchTheLog(t *testing.T) {
	s := start(t)
	s.startAdmission("b") // a hot standby
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(metricsWorld))
	for i := range 3 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", priorityWorkload(fmt.Sprint("low", i), "low"))
	}
	s.sync()
	s.must(http.StatusAccepted, "POST", "/v1/workloads", priorityWorkload("high", "high"))
	s.sync()

	// What the log says, counted here.
	reserved, evicted, preempted := 0, map[string]int{}, map[string]int{}
	s.scan(func(ev events.Event) {
		switch d := ev.Data.(type) {
		case *events.QuotaReservedData:
			if d.Admission.ClusterQueue == "cq" {
				reserved++
			}
		case *events.EvictedData:
			evicted[d.Reason]++
		case *events.PreemptionRequestedData:
			for _, v := range d.Victims {
				preempted[d.ClusterQueue+"/"+string(v.Kind)]++
			}
		}
	})
	if reserved != 3 || evicted["Preempted"] != 1 || preempted["cq/InClusterQueue"] != 1 {
		t.Fatalf("the scenario did not run as planned: %d reservations, evictions %v, preemptions %v", reserved, evicted, preempted)
	}
	pending, admitted := 0, 0
	for _, v := range s.workloads() {
		switch v.Status {
		case "pending":
			pending++
		case "admitted":
			admitted++
		}
	}

	// Only the lease holder exports Kueue's metrics; both count the log.
	leader, standby := "admission-a", "admission-b"
	if _, ok := value(s.scrape(leader), "kueue_admitted_workloads_total", "cluster_queue=cq"); !ok {
		leader, standby = standby, leader
	}
	for name := range s.scrape(standby) {
		if strings.HasPrefix(name, "kueue_") {
			t.Errorf("the standby %s exports %s", standby, name)
		}
	}
	end := float64(s.streamState().LastSeq)
	for _, name := range []string{leader, standby} {
		if v, _ := value(s.scrape(name), "jetqueue_admission_events_applied_total"); v != end {
			t.Errorf("%s: jetqueue_admission_events_applied_total = %v, want the stream's %v events", name, v, end)
		}
	}

	adm := s.scrape(leader)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kueue_admitted_workloads_total", []string{"cluster_queue=cq"}, float64(reserved)},
		{"kueue_quota_reserved_workloads_total", []string{"cluster_queue=cq"}, float64(reserved)},
		{"kueue_local_queue_admitted_workloads_total", []string{"name=lq", "namespace=ns"}, float64(reserved)},
		{"kueue_admission_wait_time_seconds", []string{"cluster_queue=cq"}, float64(reserved)},
		{"kueue_evicted_workloads_total", []string{"cluster_queue=cq", "reason=Preempted"}, float64(evicted["Preempted"])},
		{"kueue_local_queue_evicted_workloads_total", []string{"name=lq", "namespace=ns", "reason=Preempted"}, float64(evicted["Preempted"])},
		{"kueue_preempted_workloads_total", []string{"preempting_cluster_queue=cq", "reason=InClusterQueue"}, float64(preempted["cq/InClusterQueue"])},
	} {
		if got, ok := value(adm, c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n, _ := value(adm, "kueue_admission_attempts_total", "result=success"); n < 1 {
		t.Errorf("kueue_admission_attempts_total{result=success} = %v, want at least 1", n)
	}

	// The gauges follow the engine within a moment of the sync.
	cell := []string{"cohort=co", "cluster_queue=cq", "flavor=rf"}
	gauges := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kueue_cluster_queue_nominal_quota", append(cell, "resource=cpu"), 2.5},
		{"kueue_cluster_queue_borrowing_limit", append(cell, "resource=cpu"), 1},
		{"kueue_cluster_queue_lending_limit", append(cell, "resource=cpu"), 0.5},
		{"kueue_cluster_queue_nominal_quota", append(cell, "resource=memory"), 1 << 30},
		{"kueue_cluster_queue_borrowing_limit", append(cell, "resource=memory"), 0},
		{"kueue_cluster_queue_resource_reservation", append(cell, "resource=cpu"), float64(admitted)},
		{"kueue_cluster_queue_resource_usage", append(cell, "resource=memory"), float64(admitted * 100 << 20)},
		{"kueue_reserving_active_workloads", []string{"cluster_queue=cq"}, float64(admitted)},
		{"kueue_admitted_active_workloads", []string{"cluster_queue=cq"}, float64(admitted)},
		{"kueue_local_queue_admitted_active_workloads", []string{"name=lq", "namespace=ns"}, float64(admitted)},
		{"kueue_cluster_queue_status", []string{"cluster_queue=cq", "status=active"}, 1},
		{"kueue_cluster_queue_status", []string{"cluster_queue=cq", "status=pending"}, 0},
		{"kueue_local_queue_status", []string{"name=lq", "namespace=ns", "active=True"}, 1},
		{"kueue_unadmitted_workloads", []string{"cluster_queue=cq", "reason=NoReservation", "underlying_cause=WaitingForQuota"}, float64(pending)},
	}
	var mismatch []string
	for range 100 {
		adm = s.scrape(leader)
		mismatch = nil
		for _, g := range gauges {
			if got, ok := value(adm, g.name, g.labels...); !ok || got != g.want {
				mismatch = append(mismatch, fmt.Sprintf("%s%v = %v (present %v), want %v", g.name, g.labels, got, ok, g.want))
			}
		}
		active, _ := value(adm, "kueue_pending_workloads", "cluster_queue=cq", "status=active")
		parked, _ := value(adm, "kueue_pending_workloads", "cluster_queue=cq", "status=inadmissible")
		if int(active+parked) != pending {
			mismatch = append(mismatch, fmt.Sprintf("kueue_pending_workloads: active %v + inadmissible %v, want %d", active, parked, pending))
		}
		if len(mismatch) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range mismatch {
		t.Error(m)
	}
	if pending != 2 || admitted != 2 {
		t.Errorf("the query API shows %d pending and %d admitted, want 2 (low2, the victim) and 2", pending, admitted)
	}

	ing := s.scrape("ingest")
	for _, name := range []string{"jetqueue_admission_lag_events", "jetqueue_projection_lag_events"} {
		if v, ok := value(ing, name); !ok || v != 0 {
			t.Errorf("%s = %v (present %v) after a sync, want 0", name, v, ok)
		}
	}
	if v, ok := value(ing, "jetqueue_projection_events_applied_total"); !ok || v != float64(s.streamState().LastSeq) {
		t.Errorf("jetqueue_projection_events_applied_total = %v, want the stream's %d events", v, s.streamState().LastSeq)
	}
}

// histogramSum is the sum of a histogram's observations with exactly
// labels.
func histogramSum(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		var got []string
		for _, l := range m.Label {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if m.Histogram != nil && slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(labels))) {
			return m.Histogram.GetSampleSum(), true
		}
	}
	return 0, false
}

// TestKueueWaitTimesFollowTheLog: on the manual clock, the admission wait
// times are, event by event, the QuotaReserved time less the workload's
// creation or its last eviction, as the log records them.
func TestKueueWaitTimesFollowTheLog(t *testing.T) {
	s := startWith(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("1")))
	for i := range 3 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	for _, w := range []string{"w0", "w1"} {
		s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"30s"}`))
		s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/"+w+"/finish", []byte(`{"succeeded":true}`))
		s.sync()
	}

	since := map[string]time.Time{}
	var want float64
	reserved := 0
	s.scan(func(ev events.Event) {
		switch d := ev.Data.(type) {
		case *events.WorkloadSubmittedData:
			since[d.Name] = d.CreatedAt
		case *events.EvictedData:
			since[d.Name] = ev.Time
		case *events.QuotaReservedData:
			want += ev.Time.Sub(since[d.Name]).Seconds()
			reserved++
		}
	})
	if reserved != 3 || want < 59 {
		t.Fatalf("the scenario did not run as planned: %d reservations, %v s waited", reserved, want)
	}
	fams := s.scrape("admission-a")
	for _, name := range []string{"kueue_admission_wait_time_seconds", "kueue_quota_reserved_wait_time_seconds"} {
		if got, ok := histogramSum(fams, name, "cluster_queue=cq"); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s sum = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if got, ok := histogramSum(fams, "kueue_local_queue_admission_wait_time_seconds", "name=lq", "namespace=ns"); !ok || math.Abs(got-want) > 1e-9 {
		t.Errorf("kueue_local_queue_admission_wait_time_seconds sum = %v (present %v), want %v", got, ok, want)
	}
}
