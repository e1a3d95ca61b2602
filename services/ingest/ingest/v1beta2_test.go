package ingest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyCurrentKueueExamples applies current Kueue's (v1beta2) setup
// examples unchanged over HTTP, and an exported ClusterQueue with its
// status; a LocalQueue without namespace lands in ?namespace= or
// "default", as with kubectl apply -n.
func TestApplyCurrentKueueExamples(t *testing.T) {
	f := newFrontDoor(t)
	dir := filepath.Join("..", "..", "..", "libs", "api", "testdata", "kueue-main", "examples")
	// Every vendored example, unchanged: the setups through apply, the
	// Jobs through submit once their setups are in. Those with a field
	// jetqueue does not implement are refused naming it (libs/api's
	// TestKueueV1beta2Examples checks the messages).
	refused := map[string]string{
		"admin/minimal-cq.yaml":                          "spec.admissionChecksStrategy.admissionChecks[0].onFlavors",
		"admin/concurrent-admission-setup.yaml":          "spec.concurrentAdmissionPolicy",
		"admission-fs/admission-fair-sharing-setup.yaml": "spec.admissionScope",
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil || len(files) != 13 {
		t.Fatalf("found %d example files (%v), want 13", len(files), err)
	}
	var jobs []string
	for _, file := range files {
		name, _ := filepath.Rel(dir, file)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "kind: Job") {
			jobs = append(jobs, name)
			continue
		}
		code, _, body := f.do(t, "POST", "/v1/apply", map[string]string{"Content-Type": "application/yaml"}, string(data))
		if field, ok := refused[name]; ok {
			if code != http.StatusBadRequest || !strings.Contains(string(body), `"field":"`+field+`"`) {
				t.Errorf("apply %s: %d %s, want 400 on %s", name, code, body, field)
			}
			continue
		}
		if code != http.StatusOK {
			t.Errorf("apply %s: %d %s", name, code, body)
		}
	}
	if len(jobs) != 4 {
		t.Fatalf("found Jobs in %v, want 4 files", jobs)
	}
	for _, name := range jobs {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if code, _, body := f.do(t, "POST", "/v1/workloads", map[string]string{"Content-Type": "application/yaml"}, string(data)); code/100 != 2 {
			t.Errorf("submit %s: %d %s", name, code, body)
		}
	}
	exported := `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: exported, resourceVersion: "12", uid: 3c1e}
spec: {cohortName: co}
status: {pendingWorkloads: 2, admittedWorkloads: 1}
`
	if code, _, body := f.do(t, "POST", "/v1/apply", map[string]string{"Content-Type": "application/yaml"}, exported); code != http.StatusOK {
		t.Fatalf("apply an exported ClusterQueue: %d %s", code, body)
	}
	lq := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: cluster-queue}\n"
	for path, want := range map[string]string{"/v1/apply": "default", "/v1/apply?namespace=team-a": "team-a"} {
		code, _, body := f.do(t, "POST", path, map[string]string{"Content-Type": "application/yaml"}, lq)
		if code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
		var ans struct {
			Applied []struct{ Kind, Name, Namespace string } `json:"applied"`
		}
		if err := json.Unmarshal(body, &ans); err != nil || len(ans.Applied) != 1 {
			t.Fatalf("POST %s: %s (%v)", path, body, err)
		}
		if got := ans.Applied[0].Namespace; got != want {
			t.Errorf("POST %s: LocalQueue in namespace %q, want %q", path, got, want)
		}
	}
	concurrent, err := os.ReadFile(filepath.Join(dir, "admin", "concurrent-admission-setup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := f.do(t, "POST", "/v1/apply", map[string]string{"Content-Type": "application/yaml"}, string(concurrent))
	if code != http.StatusBadRequest || fieldOf(t, body) != "spec.concurrentAdmissionPolicy" {
		t.Fatalf("apply a later Kueue's field: %d %s, want 400 on spec.concurrentAdmissionPolicy", code, body)
	}
}
