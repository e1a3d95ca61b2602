package engine

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// TestEqualAdmissionsShareOne: workloads admitted alike hold one
// admission, a workload admitted otherwise its own, and one finishing
// changes nothing another holds; the table stays within its bound.
func TestEqualAdmissionsShareOne(t *testing.T) {
	e := churnWorld(t, "100000")
	now := t0
	for i := range 4 {
		wl := churnWorkload(i, 0)
		if i == 3 {
			wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}
		if _, err := e.Submit(wl, now); err != nil {
			t.Fatal(err)
		}
	}
	e.Settle(now)
	a0, a2, a3 := e.Workload("cq-a/wl-0").Admission, e.Workload("cq-a/wl-2").Admission, e.Workload("cq-b/wl-3").Admission
	b1 := e.Workload("cq-b/wl-1").Admission
	if a0 == nil || a0 != a2 {
		t.Fatalf("wl-0 and wl-2, admitted alike, hold %p and %p", a0, a2)
	}
	for _, key := range []string{"cq-a/wl-0", "cq-b/wl-1", "cq-a/wl-2", "cq-b/wl-3"} {
		if !e.Workload(key).Info.CachesNoRequests() {
			t.Errorf("admitted %s keeps the requests cached for its next attempt", key)
		}
	}
	perPod := func(key string) uintptr {
		return reflect.ValueOf(e.Workload(key).Info.PodSets[0].PerPod).Pointer()
	}
	if perPod("cq-a/wl-0") != perPod("cq-b/wl-1") || perPod("cq-a/wl-0") == perPod("cq-b/wl-3") {
		t.Errorf("per-pod requests: wl-0 and wl-1 (1 cpu each) hold %x and %x, wl-3 (2 cpu) %x",
			perPod("cq-a/wl-0"), perPod("cq-b/wl-1"), perPod("cq-b/wl-3"))
	}
	if b1 == a0 || b1 == a3 {
		t.Errorf("wl-1 (cq-b, 1 cpu) shares an admission of another ClusterQueue or request")
	}
	if err := e.Finish("cq-a/wl-0", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	fr := a2.PodSets[0]
	if fr.Usage[corev1.ResourceCPU] != 1000 || fr.Flavors[corev1.ResourceCPU] != "rf" || e.Workload("cq-a/wl-2").Admission != a2 {
		t.Errorf("wl-2's admission after wl-0 finished: %+v", fr)
	}
	if got := e.usage["cq-a"].total[quota.FlavorResource{Flavor: "rf", Resource: corev1.ResourceCPU}]; got != 1000 {
		t.Errorf("cq-a uses %dm cpu after one of its two workloads finished, want 1000m", got)
	}
	for i := 10; i < 10+maxShared+10; i++ {
		wl := churnWorkload(i, 0)
		wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(i), resource.DecimalSI)
		if _, err := e.Submit(wl, now); err != nil {
			t.Fatal(err)
		}
	}
	e.Settle(now)
	if n := len(e.admissions); n > maxShared {
		t.Errorf("%d admissions in the table, bound %d", n, maxShared)
	}
	if n := len(e.requests); n > maxShared {
		t.Errorf("%d requests in the table, bound %d", n, maxShared)
	}
}

// TestSameAdmissionComparesEveryPart: an admission shared in place of
// another must be equal in every part an event carries, whatever the hash.
func TestSameAdmissionComparesEveryPart(t *testing.T) {
	base := func() *scheduler.Admission {
		return &scheduler.Admission{ClusterQueue: "cq", Usage: quota.Usage{{Flavor: "rf", Resource: corev1.ResourceCPU}: 1000},
			PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "rf"},
				Usage: map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000}}}}
	}
	if !sameAdmission(base(), base()) {
		t.Fatal("equal admissions compare unequal")
	}
	for name, change := range map[string]func(*scheduler.Admission){
		"clusterQueue": func(a *scheduler.Admission) { a.ClusterQueue = "other" },
		"usage": func(a *scheduler.Admission) {
			a.Usage[quota.FlavorResource{Flavor: "rf", Resource: corev1.ResourceCPU}] = 2000
		},
		"usage nil":    func(a *scheduler.Admission) { a.Usage = nil },
		"podSet name":  func(a *scheduler.Admission) { a.PodSets[0].Name = "other" },
		"count":        func(a *scheduler.Admission) { a.PodSets[0].Count = 2 },
		"flavor":       func(a *scheduler.Admission) { a.PodSets[0].Flavors[corev1.ResourceCPU] = "other" },
		"podSet usage": func(a *scheduler.Admission) { a.PodSets[0].Usage[corev1.ResourceCPU] = 1 },
		"flavors nil":  func(a *scheduler.Admission) { a.PodSets[0].Flavors = nil },
		"podSets":      func(a *scheduler.Admission) { a.PodSets = append(a.PodSets, a.PodSets[0]) },
	} {
		b := base()
		change(b)
		if sameAdmission(base(), b) || sameAdmission(b, base()) {
			t.Errorf("%s differs, yet the admissions compare equal", name)
		}
	}
}
