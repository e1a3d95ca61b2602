package engine

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
)

// BenchmarkDecisionUnderBacklog is what one decision costs a service with
// a backlog: n workloads already pending behind full quota, then one
// arrival and one finish, each followed by a run to quiescence, as
// admission decides after each batch of events. A decision's cost should
// not grow with the backlog.
func BenchmarkDecisionUnderBacklog(b *testing.B) {
	for _, n := range []int{2_000, 5_000, 10_000, 20_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			e := loadedEngine(b, 50, 10, n, 1)
			now := t0.Add(time.Hour)
			e.RunToQuiescence(now)
			var admitted []string
			for k, w := range e.Workloads() {
				if w.Status == Admitted {
					admitted = append(admitted, k)
				}
			}
			i, cycles := 0, 0
			for b.Loop() {
				now = now.Add(time.Second)
				cpu := resource.MustParse("1")
				wl := &api.Workload{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("arrival-%d", i), Namespace: fmt.Sprintf("ns-%d", i%50)}}
				wl.Spec.QueueName = "lq"
				wl.Spec.PodSets = []api.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}}}}}}}
				if _, err := e.Submit(wl, now); err != nil {
					b.Fatal(err)
				}
				cycles += e.RunToQuiescence(now)
				if i < len(admitted) {
					if err := e.Finish(admitted[i], now); err != nil {
						b.Fatal(err)
					}
					cycles += e.RunToQuiescence(now)
				}
				i++
			}
			b.ReportMetric(float64(cycles)/float64(i), "cycles/op")
			b.ReportMetric(float64(len(e.pending)), "pending")
		})
	}
}
