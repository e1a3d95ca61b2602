package api

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// Kueue v0.6 site/static/examples/admin/single-clusterqueue-setup.yaml.
const singleClusterQueueSetup = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
`

// Kueue v0.6 site/static/examples/jobs/sample-job.yaml: note generateName.
const sampleJob = `apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: gcr.io/k8s-staging-perf-tests/sleep:v0.1.0
        args: ["30s"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
`

func TestKueueSampleSingleClusterQueueSetup(t *testing.T) {
	objs := mustDecode(t, singleClusterQueueSetup)
	if diff := cmp.Diff([]string{"ResourceFlavor/default-flavor", "ClusterQueue/cluster-queue", "LocalQueue/default/user-queue"}, refs(objs)); diff != "" {
		t.Fatal(diff)
	}
	for _, o := range objs {
		if err := Validate(o); err != nil {
			t.Errorf("Validate(%s): %v", ObjectRef(o), err)
		}
	}
	cq := objs[1].(*ClusterQueue)
	rq := cq.Spec.ResourceGroups[0].Flavors[0].Resources
	if rq[0].NominalQuota.MilliValue() != 9000 || rq[1].NominalQuota.Value() != 36<<30 {
		t.Errorf("quotas %v %v", rq[0].NominalQuota.String(), rq[1].NominalQuota.String())
	}
	if cq.Spec.NamespaceSelector == nil || len(cq.Spec.NamespaceSelector.MatchLabels)+len(cq.Spec.NamespaceSelector.MatchExpressions) != 0 {
		t.Errorf("namespaceSelector should be the empty match-all selector, got %#v", cq.Spec.NamespaceSelector)
	}
}

func TestKueueSampleJob(t *testing.T) {
	objs := mustDecode(t, sampleJob)
	job := objs[0].(*Job)
	if err := Validate(job); err != nil {
		t.Fatalf("a Job with only generateName must be valid: %v", err)
	}
	wl, err := JobToWorkload(job, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := wl.Spec.PodSets[0]
	if wl.Spec.QueueName != "user-queue" || ps.Count != 3 || wl.GenerateName != "sample-job-" {
		t.Errorf("workload %+v", wl)
	}
	want := map[corev1.ResourceName]int64{"cpu": 1000, "memory": 200 << 20}
	if diff := cmp.Diff(want, PodRequests(&ps.Template.Spec)); diff != "" {
		t.Error(diff)
	}
}

// TestKueueSiteExamples decodes every example shipped with Kueue v0.6.3
// (vendored in testdata, see its README): each file must either decode or
// fail only with ErrUnsupportedKind (an explicit refusal), never with another
// error. The exact file count guards against a glob that silently matches
// nothing.
func TestKueueSiteExamples(t *testing.T) {
	const kueueExampleFiles, kueueExampleObjects = 17, 9
	dir := filepath.Join("testdata", "kueue-v0.6.3", "examples")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, top...)
	if len(files) != kueueExampleFiles {
		t.Fatalf("found %d example files under %s, want %d", len(files), dir, kueueExampleFiles)
	}
	decoded := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Decode(data)
		for _, fe := range asErrors(t, err) {
			if !errors.Is(fe, ErrUnsupportedKind) {
				t.Errorf("%s: %v", filepath.Base(f), fe)
			}
		}
		for _, o := range objs {
			verr := Validate(o)
			if cq, ok := o.(*ClusterQueue); ok && len(cq.Spec.AdmissionChecks) > 0 {
				continue // refused on purpose: jetqueue has no AdmissionChecks
			}
			if verr != nil {
				t.Errorf("%s: %v", filepath.Base(f), verr)
			}
		}
		decoded += len(objs)
		t.Logf("%s: %d objects, %v", filepath.Base(f), len(objs), err)
	}
	if decoded != kueueExampleObjects {
		t.Errorf("decoded %d objects from the examples, want %d", decoded, kueueExampleObjects)
	}
}
