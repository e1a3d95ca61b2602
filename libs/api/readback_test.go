package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadBackFormAppliesAsWritten: a configuration object as jetqueue
// (or Kubernetes) prints it, with status and server-set metadata,
// decodes to the object without them; a Workload's status is still
// refused.
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
	_, err := Decode([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: []}\nstatus: {}\n"))
	if err == nil {
		t.Error("a Workload with status decoded")
	}
}
