package api

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadBackFormAppliesAsWritten: a configuration object as jetqueue
// (or Kubernetes) prints it, with status and server-set metadata,
// decodes to the object without them.
func TestReadBackFormAppliesAsWritten(t *testing.T) {
	plain := mustDecode(t, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns, labels: {a: b}}\nspec: {clusterQueue: cq}\n")
	read := mustDecode(t, `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns, labels: {a: b}, resourceVersion: "42", creationTimestamp: "2026-01-01T00:00:00Z", generation: 3,
  managedFields: [{manager: kubectl}]}
spec: {clusterQueue: cq}
status: {pendingWorkloads: 1, conditions: [{type: Active, status: "True"}]}
`)
	if diff := cmp.Diff(plain, read); diff != "" {
		t.Errorf("read-back LocalQueue (-plain,+read):\n%s", diff)
	}
	cfg := mustDecode(t, "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nmetadata: {name: default, resourceVersion: \"7\"}\nwaitForPodsReady: {enable: true}\n")
	if c := cfg[0].(*Configuration); c.WaitForPodsReady == nil || !c.WaitForPodsReady.Enable {
		t.Errorf("read-back Configuration: %+v", c)
	}
}

// TestExportedWorkloadSubmits: a Workload as `kubectl get workload -o
// yaml` prints it from a Kueue cluster (testdata/exported-workload.yaml:
// admitted, with status.admission and status.conditions, finalizers and
// owner references) decodes to the same object as its spec and
// client-set metadata alone: the status and server-set metadata are
// ignored.
func TestExportedWorkloadSubmits(t *testing.T) {
	raw, err := os.ReadFile("testdata/exported-workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exported := mustDecode(t, string(raw))
	spec, _, _ := strings.Cut(string(raw), "\nstatus:\n")
	for _, f := range []string{"  creationTimestamp: \"2024-03-12T10:20:31Z\"\n", "  generation: 1\n", "  resourceVersion: \"1234\"\n"} {
		if !strings.Contains(spec, f) {
			t.Fatalf("testdata lost %q", f)
		}
		spec = strings.Replace(spec, f, "", 1)
	}
	if diff := cmp.Diff(mustDecode(t, spec), exported); diff != "" {
		t.Errorf("exported Workload (-spec only,+exported):\n%s", diff)
	}
	w := exported[0].(*Workload)
	if w.Spec.QueueName != "user-queue" || len(w.Spec.PodSets) != 1 || w.Spec.PodSets[0].Count != 3 {
		t.Errorf("exported Workload decoded as %+v", w.Spec)
	}
}
