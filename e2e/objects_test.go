package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type condition struct {
	Type, Status, Reason, Message string
}

type kueueObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name, Namespace, ResourceVersion string
		Labels                           map[string]string
	} `json:"metadata"`
	Spec   map[string]any `json:"spec"`
	Status struct {
		Conditions         []condition `json:"conditions"`
		PendingWorkloads   *int        `json:"pendingWorkloads"`
		ReservingWorkloads *int        `json:"reservingWorkloads"`
		AdmittedWorkloads  *int        `json:"admittedWorkloads"`
		FlavorsReservation []struct {
			Name      string `json:"name"`
			Resources []struct {
				Name, Total, Borrowed string
			} `json:"resources"`
		} `json:"flavorsReservation"`
		Admission *struct {
			ClusterQueue      string `json:"clusterQueue"`
			PodSetAssignments []struct {
				Name          string            `json:"name"`
				Flavors       map[string]string `json:"flavors"`
				ResourceUsage map[string]string `json:"resourceUsage"`
				Count         int               `json:"count"`
			} `json:"podSetAssignments"`
		} `json:"admission"`
	} `json:"status"`
}

func conditions(o kueueObject) []condition { return o.Status.Conditions }

// TestKueueObjectsReadBack: every kind reads back as Kueue's object,
// with the status Kueue fills (a ClusterQueue's reservations and counts,
// a LocalQueue's, a Workload's conditions and admission); selectors
// select; what `get -o yaml` printed applies again unchanged.
func TestKueueObjectsReadBack(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("2")+`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pods-high}
value: 100
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: false}
`))
	for _, name := range []string{"w0", "w1", "w2"} {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(name))
	}
	s.sync()

	const kueue = "/apis/kueue.x-k8s.io/v1beta1"
	var cq kueueObject
	if code := s.call("GET", kueue+"/clusterqueues/cq", nil, &cq); code != http.StatusOK {
		t.Fatalf("GET cq: %d", code)
	}
	if cq.Kind != "ClusterQueue" || *cq.Status.PendingWorkloads != 1 || *cq.Status.ReservingWorkloads != 2 || *cq.Status.AdmittedWorkloads != 2 {
		t.Errorf("ClusterQueue status: %+v", cq.Status)
	}
	if len(cq.Status.FlavorsReservation) != 1 || cq.Status.FlavorsReservation[0].Name != "rf" ||
		cq.Status.FlavorsReservation[0].Resources[0].Total != "2" || cq.Status.FlavorsReservation[0].Resources[0].Borrowed != "0" {
		t.Errorf("ClusterQueue flavorsReservation: %+v", cq.Status.FlavorsReservation)
	}
	if diff := cmp.Diff([]condition{{"Active", "True", "Ready", "Can admit new workloads"}}, conditions(cq)); diff != "" {
		t.Errorf("ClusterQueue conditions (-want,+got):\n%s", diff)
	}
	var lq kueueObject
	if code := s.call("GET", kueue+"/namespaces/ns/localqueues/lq", nil, &lq); code != http.StatusOK {
		t.Fatalf("GET lq: %d", code)
	}
	if *lq.Status.PendingWorkloads != 1 || *lq.Status.AdmittedWorkloads != 2 || lq.Status.FlavorsReservation[0].Resources[0].Total != "2" {
		t.Errorf("LocalQueue status: %+v", lq.Status)
	}
	var w0, w2 kueueObject
	s.call("GET", kueue+"/namespaces/ns/workloads/w0", nil, &w0)
	s.call("GET", kueue+"/namespaces/ns/workloads/w2", nil, &w2)
	if diff := cmp.Diff([]condition{
		{"QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"},
		{"Admitted", "True", "Admitted", "The workload is admitted"},
		// No PodsReady: waitForPodsReady is off (Kueue v0.6.3 writes the
		// condition only when it is on).
	}, conditions(w0)); diff != "" {
		t.Errorf("w0 conditions (-want,+got):\n%s", diff)
	}
	if a := w0.Status.Admission; a == nil || a.ClusterQueue != "cq" || len(a.PodSetAssignments) != 1 ||
		a.PodSetAssignments[0].Flavors["cpu"] != "rf" || a.PodSetAssignments[0].ResourceUsage["cpu"] != "1" || a.PodSetAssignments[0].Count != 1 {
		t.Errorf("w0 admission: %+v", w0.Status.Admission)
	}
	if c := conditions(w2); len(c) != 1 || c[0].Type != "QuotaReserved" || c[0].Status != "False" || c[0].Reason != "Pending" ||
		!strings.Contains(c[0].Message, "insufficient unused quota for cpu in flavor rf, 1 more needed") {
		t.Errorf("w2 conditions: %+v", c)
	}

	// Lists, and the selectors.
	var list struct {
		Kind  string        `json:"kind"`
		Items []kueueObject `json:"items"`
	}
	names := func(path string) []string {
		t.Helper()
		list.Items = nil
		if code := s.call("GET", path, nil, &list); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		var out []string
		for _, o := range list.Items {
			out = append(out, o.Metadata.Name)
		}
		return out
	}
	for path, want := range map[string][]string{
		kueue + "/resourceflavors":                                       {"rf"},
		kueue + "/clusterqueues":                                         {"cq"},
		kueue + "/localqueues":                                           {"lq"},
		kueue + "/namespaces/ns/localqueues":                             {"lq"},
		kueue + "/namespaces/other/localqueues":                          nil,
		kueue + "/workloadpriorityclasses":                               {"high"},
		"/apis/scheduling.k8s.io/v1/priorityclasses":                     {"pods-high"},
		kueue + "/workloads":                                             {"w0", "w1", "w2"},
		kueue + "/workloads?fieldSelector=status%3Dpending":              {"w2"},
		kueue + "/workloads?fieldSelector=status!%3Dpending":             {"w0", "w1"},
		kueue + "/workloads?fieldSelector=queue%3Dlq,metadata.name%3Dw1": {"w1"},
		kueue + "/workloads?fieldSelector=clusterQueue%3Dother":          nil,
		kueue + "/workloads?limit=2":                                     {"w0", "w1"},
		kueue + "/localqueues?fieldSelector=clusterQueue%3Dcq":           {"lq"},
	} {
		if diff := cmp.Diff(want, names(path)); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", path, diff)
		}
	}
	var cfg map[string]any
	if code := s.call("GET", "/apis/config.kueue.x-k8s.io/v1beta1/configurations/default", nil, &cfg); code != http.StatusOK ||
		cfg["waitForPodsReady"] == nil {
		t.Errorf("GET configuration: %d %v", code, cfg)
	}
	for path, field := range map[string]string{
		kueue + "/workloads?fieldSelector=spec.nodeName%3Dx": "fieldSelector",
		kueue + "/workloads?labelSelector=a%20in%20(":        "labelSelector",
		kueue + "/workloads?limit=0":                         "limit",
	} {
		// Under /apis/ errors are a metav1.Status; its message names the
		// parameter at fault.
		var st struct{ Kind, Reason, Message string }
		if code := s.call("GET", path, nil, &st); code != http.StatusBadRequest || st.Kind != "Status" || st.Reason != "BadRequest" ||
			!strings.HasPrefix(st.Message, field+": ") {
			t.Errorf("GET %s: %d %+v, want a 400 Status on %s", path, code, st, field)
		}
	}
	if code := s.call("GET", kueue+"/clusterqueues/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET unknown cq: %d, want 404", code)
	}

	// Round trip: the object read back, status and all, applies as
	// unchanged.
	var raw json.RawMessage
	s.call("GET", kueue+"/clusterqueues/cq", nil, &raw)
	var applied struct {
		Applied []struct{ Action string } `json:"applied"`
	}
	if code := s.call("POST", "/v1/apply", raw, &applied); code != http.StatusOK || len(applied.Applied) != 1 || applied.Applied[0].Action != "unchanged" {
		t.Errorf("apply the read-back ClusterQueue: %d %+v", code, applied)
	}
}

// TestWatchPushesChanges: a watch sends the current objects, then each
// change as the log records it.
func TestWatchPushesChanges(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("1")))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w0"))
	s.sync()
	resp, err := http.Get(s.base + "/apis/kueue.x-k8s.io/v1beta1/namespaces/ns/workloads?watch=true&timeoutSeconds=20")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) (string, kueueObject) {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the watch ended", what)
			}
			var ev struct {
				Type   string      `json:"type"`
				Object kueueObject `json:"object"`
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("%s: %v: %s", what, err, l)
			}
			return ev.Type, ev.Object
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing within 10s", what)
		}
		return "", kueueObject{}
	}
	if typ, o := next("the current state"); typ != "ADDED" || o.Metadata.Name != "w0" {
		t.Fatalf("first event: %s %s", typ, o.Metadata.Name)
	}
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w1"))
	typ, o := next("w1 submitted")
	for typ == "MODIFIED" && o.Metadata.Name == "w0" {
		typ, o = next("w1 submitted")
	}
	if typ != "ADDED" || o.Metadata.Name != "w1" {
		t.Fatalf("after submitting w1: %s %s", typ, o.Metadata.Name)
	}
	// w1 waits for quota; finishing w0 admits it.
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/w0/finish", []byte(`{"succeeded":true}`))
	var finished, admitted bool
	for !finished || !admitted {
		typ, o := next("w0 finished, w1 admitted")
		if typ != "MODIFIED" {
			t.Fatalf("%s %s, want MODIFIED", typ, o.Metadata.Name)
		}
		for _, c := range conditions(o) {
			finished = finished || o.Metadata.Name == "w0" && c.Type == "Finished" && c.Status == "True" && c.Reason == "JobFinished"
			admitted = admitted || o.Metadata.Name == "w1" && c.Type == "Admitted" && c.Status == "True"
		}
	}
	s.must(http.StatusAccepted, "DELETE", "/v1/workloads/ns/w0", nil)
	for {
		typ, o := next("w0 deleted")
		if typ == "DELETED" {
			if o.Metadata.Name != "w0" {
				t.Fatalf("DELETED %s, want w0", o.Metadata.Name)
			}
			break
		}
	}

	// A ClusterQueue's watch follows its status, which workloads move.
	cqResp, err := http.Get(s.base + "/apis/kueue.x-k8s.io/v1beta1/clusterqueues?watch=true&timeoutSeconds=20")
	if err != nil {
		t.Fatal(err)
	}
	defer cqResp.Body.Close()
	cqEvents := json.NewDecoder(cqResp.Body)
	type cqEvent struct {
		Type   string      `json:"type"`
		Object kueueObject `json:"object"`
	}
	var ev cqEvent
	if err := cqEvents.Decode(&ev); err != nil || ev.Type != "ADDED" || *ev.Object.Status.PendingWorkloads != 0 || *ev.Object.Status.AdmittedWorkloads != 1 {
		t.Fatalf("first ClusterQueue event: %v %+v", err, ev)
	}
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w2"))
	if err := cqEvents.Decode(&ev); err != nil || ev.Type != "MODIFIED" || *ev.Object.Status.PendingWorkloads != 1 || *ev.Object.Status.AdmittedWorkloads != 1 {
		t.Fatalf("ClusterQueue event after a submission: %v %s pending %v", err, ev.Type, ev.Object.Status.PendingWorkloads)
	}
}
