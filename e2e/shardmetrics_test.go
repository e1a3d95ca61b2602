package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
)

// TestKueueMetricsSumOverShards: under --shards 2 every shard counts the
// whole log, but each exports Kueue's series only for the ClusterQueues
// of its own trees, so a sum over both shards' scrapes (what the shipped
// dashboard's sum() does) equals the log: admissions per ClusterQueue and
// per LocalQueue, each series from exactly the shard that owns its tree,
// and the quota gauges once per cell.
func TestKueueMetricsSumOverShards(t *testing.T) {
	s := startShards(t, 2)
	world, lqs := shardWorld(2)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(world))
	for i, lq := range lqs {
		for j := range 2 {
			s.must(http.StatusAccepted, "POST", "/v1/workloads", []byte(shardWorkload(fmt.Sprintf("w-%d-%d", i, j), lq, 1, 0)))
		}
	}
	want := 2 * len(lqs)
	reserved := map[string]float64{}
	for deadline := time.Now().Add(time.Minute); ; {
		s.sync()
		clear(reserved)
		total := 0
		s.scan(func(ev events.Event) {
			if d, ok := ev.Data.(*events.QuotaReservedData); ok {
				reserved[d.Admission.ClusterQueue]++
				total++
			}
		})
		if total == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d admissions in the log, want %d", total, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	owner := map[string]int{} // ClusterQueue → the shard owning its tree
	for _, cohorts := range cohortsOf(2, 2) {
		for _, c := range cohorts {
			for q := range 2 {
				owner[fmt.Sprintf("%s-q%d", c, q)] = engine.TreeOwner(c, "", 2)
			}
		}
	}
	for q := range 2 {
		name := fmt.Sprintf("solo-%d", q)
		owner[name] = engine.TreeOwner("", name, 2)
	}

	var problems []string
	for range 100 {
		scrapes := []map[string]*dto.MetricFamily{s.scrape("admission-0-a"), s.scrape("admission-1-a")}
		problems = nil
		check := func(metric, label string, want map[string]float64, valueOf func(*dto.Metric) float64) {
			sum := map[string]float64{}
			from := map[string][]int{}
			for shard, fams := range scrapes {
				f := fams[metric]
				if f == nil {
					continue
				}
				for _, m := range f.Metric {
					key := labelValue(m, label)
					sum[key] += valueOf(m)
					if !slices.Contains(from[key], shard) {
						from[key] = append(from[key], shard)
					}
				}
			}
			for key, w := range want {
				cq := strings.TrimPrefix(key, "lq-")
				if sum[key] != w {
					problems = append(problems, fmt.Sprintf("sum over shards of %s{%s=%q} = %v, want %v", metric, label, key, sum[key], w))
				}
				if !slices.Equal(from[key], []int{owner[cq]}) {
					problems = append(problems, fmt.Sprintf("%s{%s=%q} exported by shards %v, want only %d", metric, label, key, from[key], owner[cq]))
				}
			}
		}
		counter := func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
		gauge := func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }
		byLQ := map[string]float64{}
		nominal := map[string]float64{}
		for cq, n := range reserved {
			byLQ["lq-"+cq] = n
			nominal[cq] = 3
			if strings.HasSuffix(cq, "q1") {
				nominal[cq] = 4
			} else if strings.HasPrefix(cq, "solo-") {
				nominal[cq] = 4
			}
		}
		check("kueue_admitted_workloads_total", "cluster_queue", reserved, counter)
		check("kueue_quota_reserved_workloads_total", "cluster_queue", reserved, counter)
		check("kueue_local_queue_admitted_workloads_total", "name", byLQ, counter)
		check("kueue_reserving_active_workloads", "cluster_queue", reserved, gauge)
		check("kueue_cluster_queue_nominal_quota", "cluster_queue", nominal, gauge)
		if len(problems) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
