package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const multiDocYAML = `
# leading comment, and an empty document follows
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: on-demand
  labels:
    team: infra
spec:
  nodeLabels:
    instance-type: on-demand
---   # a separator may carry a comment
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cq-a
spec:
  cohort: co
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: 9
        lendingLimit: 500m
      - name: memory
        nominalQuota: 36Gi
---
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: team-a
  name: lq
spec:
  clusterQueue: cq-a
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: high
value: 10000
description: "urgent"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: pod-high
value: 500
globalDefault: false
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  requeuingStrategy:
    backoffLimitCount: 5
`

func refs(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, ObjectRef(o))
	}
	return out
}

func mustDecode(t *testing.T, data string) []Object {
	t.Helper()
	objs, err := Decode([]byte(data))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return objs
}

func TestDecodeMultiDocumentYAML(t *testing.T) {
	objs := mustDecode(t, multiDocYAML)
	want := []string{"ResourceFlavor/on-demand", "ClusterQueue/cq-a", "LocalQueue/team-a/lq",
		"WorkloadPriorityClass/high", "PriorityClass/pod-high", "Configuration"}
	if diff := cmp.Diff(want, refs(objs)); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	cq := objs[1].(*ClusterQueue)
	r := cq.Spec.ResourceGroups[0].Flavors[0].Resources
	if r[0].NominalQuota.MilliValue() != 9000 || r[0].LendingLimit.MilliValue() != 500 || r[1].NominalQuota.Value() != 36<<30 {
		t.Errorf("quantities decoded wrongly: %+v", r)
	}
	if cq.Spec.NamespaceSelector == nil {
		t.Error("namespaceSelector {} must decode to a non-nil (match-all) selector")
	}
	if cq.Spec.QueueingStrategy != BestEffortFIFO {
		t.Error("Decode must apply defaults")
	}
	if objs[3].(*WorkloadPriorityClass).Value != 10000 || objs[4].(*PriorityClass).Value != 500 {
		t.Error("priority class values")
	}
	for _, o := range objs {
		if err := Validate(o); err != nil {
			t.Errorf("Validate(%s): %v", ObjectRef(o), err)
		}
	}
}

func TestDecodeJSONObject(t *testing.T) {
	objs := mustDecode(t, ` {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload",
	  "metadata":{"namespace":"team-a","name":"wl"},
	  "spec":{"queueName":"lq","podSets":[{"count":2,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`)
	if diff := cmp.Diff([]string{"Workload/team-a/wl"}, refs(objs)); diff != "" {
		t.Fatal(diff)
	}
	wl := objs[0].(*Workload)
	if wl.Spec.PodSets[0].Name != "main" || wl.Spec.Active == nil || !*wl.Spec.Active {
		t.Errorf("workload not defaulted: %+v", wl.Spec)
	}
}

func TestDecodeJSONList(t *testing.T) {
	for name, data := range map[string]string{
		"array": `[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"a"}},
		           {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"b"}}]`,
		"kind List": `{"apiVersion":"v1","kind":"List","metadata":{},"items":[
		           {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"a"}},
		           {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"b"}}]}`,
		"YAML List": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: kueue.x-k8s.io/v1beta1\n  kind: ResourceFlavor\n  metadata: {name: a}\n" +
			"- apiVersion: kueue.x-k8s.io/v1beta1\n  kind: ResourceFlavor\n  metadata: {name: b}\n",
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustDecode(t, data)
			if diff := cmp.Diff([]string{"ResourceFlavor/a", "ResourceFlavor/b"}, refs(objs)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestDecodeSkipsEmptyDocuments(t *testing.T) {
	for _, data := range []string{"", "   \n", "---\n---\n", "# only a comment\n", "---\n# c\n---\n"} {
		objs, err := Decode([]byte(data))
		if err != nil || len(objs) != 0 {
			t.Errorf("Decode(%q) = %v, %v; want nothing", data, objs, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	const cqHead = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata:\n  name: cq-a\n"
	for _, tc := range []struct {
		name string
		data string
		want []FieldError
	}{
		{"unknown field names its path", cqHead + "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavorz: []\n",
			[]FieldError{{"ClusterQueue/cq-a", "spec.resourceGroups[0].flavorz", `document 1: unknown field "spec.resourceGroups[0].flavorz"`}}},
		{"field names are case-sensitive", cqHead + "Spec: {}\n",
			[]FieldError{{"ClusterQueue/cq-a", "Spec", `document 1: unknown field "Spec"`}}},
		{"duplicate YAML field", cqHead + "spec:\n  cohort: a\n  cohort: b\n",
			[]FieldError{{"ClusterQueue/cq-a", "spec.cohort", `document 1: duplicate field "spec.cohort"`}}},
		{"duplicate JSON field", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"namespace":"ns","name":"lq"},"spec":{"clusterQueue":"a","clusterQueue":"b"}}`,
			[]FieldError{{"LocalQueue/ns/lq", "spec.clusterQueue", `document 1: duplicate field "spec.clusterQueue"`}}},
		{"bad quantity names its path", cqHead + "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n      - name: cpu\n        nominalQuota: 9x\n",
			[]FieldError{{"ClusterQueue/cq-a", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
				"document 1: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"}}},
		{"bad duration", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  timeout: 5 minutes\n",
			[]FieldError{{"Configuration", "waitForPodsReady.timeout", `document 1: time: unknown unit " minutes" in duration "5 minutes"`}}},
		{"wrong type", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: p\nvalue: high\n",
			[]FieldError{{"WorkloadPriorityClass/p", "value", "document 1: json: cannot unmarshal string into Go struct field WorkloadPriorityClass.value of type int32"}}},
		{"wrong apiVersion for a known kind", "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata:\n  name: cq-a\n",
			[]FieldError{{"ClusterQueue/cq-a", "apiVersion", `document 1: Unsupported value: "kueue.x-k8s.io/v1alpha1": supported values: "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2" (for kind ClusterQueue)`}}},
		{"v1beta2 is not a Job's apiVersion", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Job\nmetadata: {name: j, namespace: ns}\n",
			[]FieldError{{"Job/ns/j", "apiVersion", `document 1: Unsupported value: "kueue.x-k8s.io/v1beta2": supported values: "batch/v1" (for kind Job)`}}},
		{"apiVersion required", "kind: Job\nmetadata:\n  name: j\n  namespace: ns\n",
			[]FieldError{{"Job/ns/j", "apiVersion", "document 1: Required value"}}},
		{"kind required", "apiVersion: v1\nmetadata:\n  name: x\n",
			[]FieldError{{"document 1", "kind", "Required value"}}},
		{"not an object", "- 1\n",
			[]FieldError{{"document 1, items[0]", "", "must be an object with apiVersion and kind"}}},
		{"scalar document", "hello\n",
			[]FieldError{{"document 1", "", "must be an object with apiVersion and kind"}}},
		{"configuration fields we do not implement", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nmanageJobsWithoutQueueName: true\n",
			[]FieldError{{"Configuration", "manageJobsWithoutQueueName", `document 1: unknown field "manageJobsWithoutQueueName"; jetqueue implements only waitForPodsReady of Kueue's Configuration`}}},
		{"a later Kueue's field is refused by name", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq-a}\nspec: {fairSharing: {weight: 2}}\n",
			[]FieldError{{"ClusterQueue/cq-a", "spec.fairSharing", `document 1: spec.fairSharing is a field of Kueue releases after v0.6 (fair sharing) that jetqueue does not implement`}}},
		{"a later Kueue's podSet field is refused by name", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: [{name: main, count: 1, topologyRequest: {required: rack}, template: {spec: {containers: []}}}]}\n",
			[]FieldError{{"Workload/ns/w", "spec.podSets[0].topologyRequest", `document 1: spec.podSets[0].topologyRequest is a field of Kueue releases after v0.6 (topology-aware scheduling) that jetqueue does not implement`}}},
		{"v1beta1's cohort is not a v1beta2 field", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq-a}\nspec: {cohort: c}\n",
			[]FieldError{{"ClusterQueue/cq-a", "spec.cohort", `document 1: unknown field "spec.cohort"`}}},
		{"v1beta2 priorityClassRef of an unknown group", "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: [], priorityClassRef: {group: x.io, kind: P, name: p}}\n",
			[]FieldError{{"Workload/ns/w", "spec.priorityClassRef", `document 1: Invalid value: "x.io/P": group and kind must be kueue.x-k8s.io/WorkloadPriorityClass or scheduling.k8s.io/PriorityClass`}}},
		{"errors of every document are reported", "kind: Foo\napiVersion: x/v1\n---\n" + cqHead + "spec: {cohortt: a}\n",
			[]FieldError{
				{"Foo", "kind", `document 1: unsupported kind "Foo" (apiVersion "x/v1"); jetqueue accepts ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass, PriorityClass, Workload, Job, Configuration`},
				{"ClusterQueue/cq-a", "spec.cohortt", `document 2: unknown field "spec.cohortt"`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.data))
			if len(objs) != 0 {
				t.Errorf("got objects %v", refs(objs))
			}
			diffErrors(t, tc.want, err)
		})
	}
}

// TestDecodeLocalQueueStopPolicy: a LocalQueue's stopPolicy (Kueue after
// v0.6) is taken at v1beta1 and v1beta2.
func TestDecodeLocalQueueStopPolicy(t *testing.T) {
	for _, v := range []string{"v1beta1", "v1beta2"} {
		objs, err := Decode([]byte("apiVersion: kueue.x-k8s.io/" + v + "\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq, stopPolicy: HoldAndDrain}\n"))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		lq := objs[0].(*LocalQueue)
		if p := lq.Spec.StopPolicy; p == nil || *p != StopPolicyHoldAndDrain {
			t.Errorf("%s: stopPolicy %v", v, p)
		}
		if err := Validate(lq); err != nil {
			t.Errorf("%s: %v", v, err)
		}
		lq.Spec.StopPolicy = ptr(StopPolicy("Pause"))
		if err := Validate(lq); err == nil || !strings.Contains(err.Error(), `spec.stopPolicy: Unsupported value: "Pause"`) {
			t.Errorf("%s: stopPolicy Pause: %v", v, err)
		}
	}
}

func TestDecodeRefusesOutOfScopeKinds(t *testing.T) {
	for name, data := range map[string]string{
		"AdmissionCheck":            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata:\n  name: prov\nspec:\n  controllerName: kueue.x-k8s.io/provisioning-request\n",
		"ProvisioningRequestConfig": "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ProvisioningRequestConfig\nmetadata:\n  name: prov\n",
		"Pod":                       "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kueue-pod\n  labels:\n    kueue.x-k8s.io/queue-name: user-queue\nspec:\n  containers:\n  - name: c\n    image: busybox\n",
		"MPIJob":                    "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata:\n  name: pi\n  labels:\n    kueue.x-k8s.io/queue-name: user-queue\nspec:\n  slotsPerWorker: 1\n",
		"RayJob":                    "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: r\n",
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := Decode([]byte(data))
			if !errors.Is(err, ErrUnsupportedKind) {
				t.Fatalf("Decode = %v, want ErrUnsupportedKind", err)
			}
			if len(objs) != 0 {
				t.Errorf("got objects %v", refs(objs))
			}
			errs := asErrors(t, err)
			if len(errs) != 1 || errs[0].Field != "kind" {
				t.Errorf("want one error on field kind, got %v", errs)
			}
		})
	}
	// The other documents still decode, so a caller may choose to skip the
	// unsupported ones; a non-kind error does not match the sentinel.
	objs, err := Decode([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata:\n  name: prov\n---\n" +
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: rf\n"))
	if !errors.Is(err, ErrUnsupportedKind) || len(objs) != 1 {
		t.Errorf("mixed input: objs=%v err=%v", refs(objs), err)
	}
	if _, err := Decode([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: rf\nspecc: {}\n")); errors.Is(err, ErrUnsupportedKind) {
		t.Errorf("unknown field must not match ErrUnsupportedKind: %v", err)
	}
}

func TestDecodeJob(t *testing.T) {
	objs := mustDecode(t, `apiVersion: batch/v1
kind: Job
metadata:
  namespace: team-a
  name: train
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  parallelism: 2
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources:
          requests:
            cpu: "1"
`)
	job := objs[0].(*Job)
	if *job.Spec.Parallelism != 2 || job.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 1000 {
		t.Errorf("job decoded wrongly: %+v", job.Spec)
	}
	if job.APIVersion != BatchAPIVersion || job.Kind != KindJob {
		t.Errorf("TypeMeta %+v", job.TypeMeta)
	}
}

func TestDecodeKeepsObjectMeta(t *testing.T) {
	objs := mustDecode(t, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: rf\n  annotations: {a: b}\n  uid: \"1234\"\n")
	want := metav1.ObjectMeta{Name: "rf", Annotations: map[string]string{"a": "b"}, UID: "1234"}
	if diff := cmp.Diff(want, objs[0].(*ResourceFlavor).ObjectMeta); diff != "" {
		t.Error(diff)
	}
}

// TestLargePlainScalarsAsTheParserSaysThem: a large document that can
// only be a plain scalar is refused as the parser refuses any scalar,
// without the parse; the parser's own answer for the same text is the
// reference, taken through a document plainScalar leaves to it (a ':'
// in a trailing comment).
func TestLargePlainScalarsAsTheParserSaysThem(t *testing.T) {
	for _, junk := range []string{
		strings.Repeat("x", 64<<10),
		"apiVersion v1 kind Workload\n" + strings.Repeat("word ", 1000),
		strings.Repeat("0123456789", 200) + "\n---\n" + strings.Repeat("y", 2000),
	} {
		if !plainScalar([]byte(strings.SplitN(junk, "\n---\n", 2)[0])) {
			t.Fatalf("plainScalar(%.20q...) = false", junk)
		}
		_, got := Decode([]byte(junk))
		var ref []string
		for _, doc := range strings.Split(junk, "\n---\n") {
			_, err := Decode([]byte(doc + "\n# parsed: not sniffed\n"))
			ref = append(ref, err.Error())
		}
		if got == nil {
			t.Fatalf("%.20q...: no error", junk)
		}
		for i, r := range ref {
			want := strings.Replace(r, "document 1", fmt.Sprintf("document %d", i+1), 1)
			if !strings.Contains(got.Error(), want) {
				t.Errorf("%.20q...: got %q, want it to hold the parser's %q", junk, got, want)
			}
		}
	}
	for _, doc := range []string{"null", "~", strings.Repeat("a", 2000) + ": b", "# c\n" + strings.Repeat("x", 2000), "!tag " + strings.Repeat("x", 2000)} {
		if plainScalar([]byte(doc)) {
			t.Errorf("plainScalar(%.20q...) = true, want it left to the parser", doc)
		}
	}
}

// BenchmarkDecodeJunk decodes 64 KiB of a plain scalar as a durable
// submitter's junk is, and the same text with a ':' in a trailing
// comment, which the parser reads: both sides of what plainScalar saves.
func BenchmarkDecodeJunk(b *testing.B) {
	junk := strings.Repeat("x", 64<<10)
	for name, doc := range map[string]string{"sniffed": junk, "parsed": junk + "\n# a: b\n"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := Decode([]byte(doc)); err == nil {
					b.Fatal("decoded junk")
				}
			}
		})
	}
}
