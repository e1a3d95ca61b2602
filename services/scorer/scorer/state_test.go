package scorer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// gpuScoring is the proposal's profile: GPUs binpacked and scarce, cpu
// spread.
var gpuScoring = scoring.Config{
	FitPlus: map[corev1.ResourceName]scoring.ResourcesType{
		"nvidia.com/gpu": {Type: scoring.MostAllocated, Weight: 2},
		"cpu":            {Type: scoring.LeastAllocated, Weight: 1},
	},
	Scarce: []corev1.ResourceName{"nvidia.com/gpu"},
}

func flavorObject(name, labels, tolerations string) string {
	return fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":%q},
		"spec":{"nodeLabels":%s,"tolerations":%s}}`, name, labels, tolerations)
}

func flavorApplied(name, labels, tolerations string) events.Event {
	return events.Event{ID: "cfg-" + name, Type: events.ConfigApplied, Time: t0, Subject: events.ConfigSubject("ResourceFlavor", "", name),
		Data: &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "ResourceFlavor", Name: name},
			Object: json.RawMessage(flavorObject(name, labels, tolerations))}}
}

// podSetJSON is a podSet whose one container requests the given
// resources ("cpu=4,nvidia.com/gpu=2").
func podSetJSON(name string, count int, requests string, nodeSelector string) string {
	var reqs []string
	for kv := range strings.SplitSeq(requests, ",") {
		k, v, _ := strings.Cut(kv, "=")
		reqs = append(reqs, fmt.Sprintf("%q:%q", k, v))
	}
	sel := ""
	if nodeSelector != "" {
		sel = fmt.Sprintf(`"nodeSelector":%s,`, nodeSelector)
	}
	return fmt.Sprintf(`{"name":%q,"count":%d,"template":{"spec":{%s"containers":[{"name":"c","resources":{"requests":{%s}}}]}}}`,
		name, count, sel, strings.Join(reqs, ","))
}

func workloadJSON(ns, name string, podSets ...string) string {
	return fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},
		"spec":{"queueName":"lq","podSets":[%s]}}`, name, ns, strings.Join(podSets, ","))
}

func submittedEvent(ns, name string, podSets ...string) events.Event {
	ref := events.WorkloadRef{Namespace: ns, Name: name}
	return events.Event{ID: "sub-" + name, Type: events.WorkloadSubmitted, Time: t0, Subject: events.WorkloadSubject(ns, name),
		Data: &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(workloadJSON(ns, name, podSets...)), CreatedAt: t0}}
}

// psa is one podSet's admission: its admitted count and flavor per resource.
func psa(name string, count int32, flavors map[corev1.ResourceName]string) scheduler.PodSetAdmission {
	return scheduler.PodSetAdmission{Name: name, Count: count, Flavors: flavors}
}

func gpuFlavor(rs ...corev1.ResourceName) map[corev1.ResourceName]string {
	m := map[corev1.ResourceName]string{}
	for _, r := range rs {
		m[r] = "gpu"
	}
	return m
}

var gpuTaints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}

// cluster: two GPU nodes (tainted, labelled pool=gpu), one cpu node.
func cluster() []scoring.Node {
	return []scoring.Node{
		{Name: "cpu-a", Labels: map[string]string{"pool": "cpu"}, Allocatable: res("cpu", "64")},
		{Name: "gpu-a", Labels: map[string]string{"pool": "gpu"}, Taints: gpuTaints,
			Allocatable: res("cpu", "32", "nvidia.com/gpu", "8"), Requested: res("cpu", "4", "nvidia.com/gpu", "2")},
		{Name: "gpu-b", Labels: map[string]string{"pool": "gpu"}, Taints: gpuTaints,
			Allocatable: res("cpu", "32", "nvidia.com/gpu", "8")},
	}
}

func ns(node string, fit, scarce int64) events.NodeScore {
	return events.NodeScore{Node: node, FitPlus: fit, Scarce: scarce, Total: fit + scarce}
}

func TestPlace(t *testing.T) {
	const tolerateGPU = `[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]`
	st := NewState()
	for _, ev := range []events.Event{
		flavorApplied("gpu", `{"pool":"gpu"}`, tolerateGPU),
		flavorApplied("gpu-untolerated", `{"pool":"gpu"}`, `[]`),
		flavorApplied("cpu", `{"pool":"cpu"}`, `[]`),
		flavorApplied("zone-a", `{"pool":"gpu","zone":"a"}`, `[]`),
	} {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	gpu2 := podSetJSON("workers", 4, "cpu=4,nvidia.com/gpu=2", "")
	cases := []struct {
		name    string
		podSets []string
		ad      []scheduler.PodSetAdmission
		want    []events.PodSetPlacement
	}{{
		// Hand arithmetic, gpu weight 2 MostAllocated, cpu 1 LeastAllocated:
		// gpu-a 1st pod: gpu 4/8 → 50, cpu 8/32 → 75: (100+75)/3 = 58;
		// then 6/8 → 75, 12/32 → 62: 70; then 8/8 → 100, 16/32 → 50: 83;
		// full, so gpu-b: 2/8 → 25, 4/32 → 87: 45. No unrequested resource
		// on the GPU nodes, so scarce is 100. cpu-a lacks pool=gpu.
		name:    "binpacks the GPU podSet on the flavor's nodes",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 4, gpuFlavor("cpu", "nvidia.com/gpu"))},
		want: []events.PodSetPlacement{{Name: "workers", Nodes: []events.NodeScore{
			ns("gpu-a", 58, 100), ns("gpu-a", 70, 100), ns("gpu-a", 83, 100), ns("gpu-b", 45, 100)}}},
	}, {
		name:    "pods of earlier podSets count when later ones are placed",
		podSets: []string{podSetJSON("first", 3, "cpu=4,nvidia.com/gpu=2", ""), podSetJSON("second", 1, "cpu=4,nvidia.com/gpu=2", "")},
		ad: []scheduler.PodSetAdmission{psa("first", 3, gpuFlavor("cpu", "nvidia.com/gpu")),
			psa("second", 1, gpuFlavor("cpu", "nvidia.com/gpu"))},
		want: []events.PodSetPlacement{
			{Name: "first", Nodes: []events.NodeScore{ns("gpu-a", 58, 100), ns("gpu-a", 70, 100), ns("gpu-a", 83, 100)}},
			{Name: "second", Nodes: []events.NodeScore{ns("gpu-b", 45, 100)}}},
	}, {
		name:    "the admitted count is placed (partial admission)",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 1, gpuFlavor("cpu", "nvidia.com/gpu"))},
		want:    []events.PodSetPlacement{{Name: "workers", Nodes: []events.NodeScore{ns("gpu-a", 58, 100)}}},
	}, {
		name:    "what does not fit says which filter failed most",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 9, gpuFlavor("cpu", "nvidia.com/gpu"))},
		want: []events.PodSetPlacement{{Name: "workers", Nodes: []events.NodeScore{
			ns("gpu-a", 58, 100), ns("gpu-a", 70, 100), ns("gpu-a", 83, 100),
			ns("gpu-b", 45, 100), ns("gpu-b", 58, 100), ns("gpu-b", 70, 100), ns("gpu-b", 83, 100)},
			Reason: ReasonNoFeasibleNode, Filter: "InsufficientResource nvidia.com/gpu"}},
	}, {
		name:    "no node at all",
		podSets: []string{podSetJSON("workers", 1, "nvidia.com/gpu=16", "")},
		ad:      []scheduler.PodSetAdmission{psa("workers", 1, gpuFlavor("nvidia.com/gpu"))},
		want:    []events.PodSetPlacement{{Name: "workers", Reason: ReasonNoFeasibleNode, Filter: "InsufficientResource nvidia.com/gpu"}},
	}, {
		name:    "the flavor's tolerations are the pod's",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 1, map[corev1.ResourceName]string{"cpu": "gpu-untolerated", "nvidia.com/gpu": "gpu-untolerated"})},
		want:    []events.PodSetPlacement{{Name: "workers", Reason: ReasonNoFeasibleNode, Filter: "UntoleratedTaint"}},
	}, {
		name:    "every assigned flavor's nodeLabels apply",
		podSets: []string{podSetJSON("main", 1, "cpu=1", "")},
		ad:      []scheduler.PodSetAdmission{psa("main", 1, map[corev1.ResourceName]string{"cpu": "gpu", "memory": "zone-a"})},
		want:    []events.PodSetPlacement{{Name: "main", Reason: ReasonNoFeasibleNode, Filter: "NodeLabelsMismatch"}},
	}, {
		name:    "conflicting flavors",
		podSets: []string{podSetJSON("main", 1, "cpu=1", "")},
		ad:      []scheduler.PodSetAdmission{psa("main", 1, map[corev1.ResourceName]string{"cpu": "cpu", "memory": "gpu"})},
		want:    []events.PodSetPlacement{{Name: "main", Reason: ReasonNoFeasibleNode, Filter: "ConflictingNodeLabels pool"}},
	}, {
		name:    "the template's own nodeSelector applies",
		podSets: []string{podSetJSON("main", 1, "cpu=1", `{"disk":"ssd"}`)},
		ad:      []scheduler.PodSetAdmission{psa("main", 1, map[corev1.ResourceName]string{"cpu": "cpu"})},
		want:    []events.PodSetPlacement{{Name: "main", Reason: ReasonNoFeasibleNode, Filter: "NodeLabelsMismatch"}},
	}, {
		// cpu-a: 1 of 64 cpu → (63·100/64) = 98; pool=cpu only.
		name:    "a cpu podSet on the cpu flavor",
		podSets: []string{podSetJSON("main", 1, "cpu=1", "")},
		ad:      []scheduler.PodSetAdmission{psa("main", 1, map[corev1.ResourceName]string{"cpu": "cpu"})},
		want:    []events.PodSetPlacement{{Name: "main", Nodes: []events.NodeScore{ns("cpu-a", 98, 100)}}},
	}, {
		name:    "an unknown flavor",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 1, map[corev1.ResourceName]string{"cpu": "gone"})},
		want:    []events.PodSetPlacement{{Name: "workers", Reason: ReasonNoFeasibleNode, Filter: "UnknownResourceFlavor gone"}},
	}, {
		name:    "an unknown podSet",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("other", 1, gpuFlavor("cpu"))},
		want:    []events.PodSetPlacement{{Name: "other", Reason: ReasonNoFeasibleNode, Filter: "UnknownPodSet"}},
	}, {
		name:    "a count of zero places nothing",
		podSets: []string{gpu2},
		ad:      []scheduler.PodSetAdmission{psa("workers", 0, gpuFlavor("cpu"))},
		want:    []events.PodSetPlacement{{Name: "workers"}},
	}}
	sc, err := scoring.New(gpuScoring)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.Apply(submittedEvent("ns", "wl", tc.podSets...)); err != nil {
				t.Fatal(err)
			}
			nodes := cluster()
			before := cluster()
			got := Place(sc, st.Workloads["ns/wl"], st.Flavors, &scheduler.Admission{ClusterQueue: "cq", PodSets: tc.ad}, nodes)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("placement (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, nodes); d != "" {
				t.Errorf("Place modified its nodes (-before +after):\n%s", d)
			}
		})
	}
}

// TestStateApply: the state keeps live workloads and their current
// admission, and forgets what ended.
func TestStateApply(t *testing.T) {
	ref := events.WorkloadRef{Namespace: "ns", Name: "wl"}
	subj := events.WorkloadSubject("ns", "wl")
	ev := func(id string, typ events.Type, data any) events.Event {
		return events.Event{ID: id, Type: typ, Time: t0, Subject: subj, Data: data}
	}
	type view struct {
		Live                 bool
		Admission, PlacedFor string
	}
	look := func(s *State) view {
		wl := s.Workloads["ns/wl"]
		if wl == nil {
			return view{}
		}
		return view{true, wl.Admission, wl.PlacedFor}
	}
	submit := submittedEvent("ns", "wl", podSetJSON("main", 1, "cpu=1", ""))
	admit := ev("qr-1", events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref})
	cases := []struct {
		name string
		log  []events.Event
		want view
	}{
		{"submitted", []events.Event{submit}, view{Live: true}},
		{"admitted", []events.Event{submit, admit}, view{true, "qr-1", ""}},
		{"placed", []events.Event{submit, admit, ev(PlacedID("qr-1"), events.Placed, &events.PlacedData{WorkloadRef: ref})}, view{true, "qr-1", "qr-1"}},
		{"evicted", []events.Event{submit, admit, ev("ev-1", events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: "Preempted"})}, view{Live: true}},
		{"finished", []events.Event{submit, admit, ev("fin", events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref})}, view{}},
		{"deleted", []events.Event{submit, ev("del", events.WorkloadDeleted, &ref)}, view{}},
		{"pods ready changes nothing", []events.Event{submit, admit, ev("ready", events.PodsReady, &ref)}, view{true, "qr-1", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			for _, e := range tc.log {
				if err := s.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tc.want, look(s)); d != "" {
				t.Errorf("state (-want +got):\n%s", d)
			}
		})
	}
	t.Run("flavors come and go", func(t *testing.T) {
		s := NewState()
		_ = s.Apply(flavorApplied("rf", `{"a":"b"}`, `[]`))
		if s.Flavors["rf"] == nil || s.Flavors["rf"].Spec.NodeLabels["a"] != "b" {
			t.Fatalf("flavor not applied: %+v", s.Flavors)
		}
		_ = s.Apply(events.Event{ID: "d", Type: events.ConfigDeleted, Data: &events.ConfigRef{Kind: "ResourceFlavor", Name: "rf"}})
		if len(s.Flavors) != 0 {
			t.Errorf("flavor not deleted: %+v", s.Flavors)
		}
	})
	t.Run("a workload that does not decode is an error", func(t *testing.T) {
		bad := submit
		bad.Data = &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(`{"kind":"Workload"`)}
		if err := NewState().Apply(bad); err == nil {
			t.Error("no error")
		}
	})
}
