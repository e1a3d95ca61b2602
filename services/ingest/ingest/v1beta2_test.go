package ingest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestApplyCurrentKueueExamples applies current Kueue's (v1beta2) setup
// examples unchanged over HTTP, and an exported ClusterQueue with its
// status; a LocalQueue without namespace lands in ?namespace= or
// "default", as with kubectl apply -n.
func TestApplyCurrentKueueExamples(t *testing.T) {
	f := newFrontDoor(t)
	dir := filepath.Join("..", "..", "..", "libs", "api", "testdata", "kueue-main", "examples")
	for _, name := range []string{"getting-started/quick-start-setup.yaml", "admin/shared-quota-setup.yaml", "admin/resource-flavor-taints.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := f.do(t, "POST", "/v1/apply", map[string]string{"Content-Type": "application/yaml"}, string(data))
		if code != http.StatusOK {
			t.Fatalf("apply %s: %d %s", name, code, body)
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
