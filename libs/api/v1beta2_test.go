package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKueueV1beta2Examples decodes current Kueue's examples unchanged:
// each one jetqueue implements decodes and validates; the rest are
// refused with a message naming the later Kueue feature.
func TestKueueV1beta2Examples(t *testing.T) {
	refused := map[string]string{
		"minimal-cq.yaml":                   "an admission check limited to some flavors is not implemented by jetqueue",
		"concurrent-admission-setup.yaml":   "spec.concurrentAdmissionPolicy is a field of Kueue releases after v0.6 (concurrent admission) that jetqueue does not implement",
		"admission-fair-sharing-setup.yaml": "is a field of Kueue releases after v0.6 (fair sharing) that jetqueue does not implement",
	}
	files, err := filepath.Glob(filepath.Join("testdata", "kueue-main", "examples", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 13 {
		t.Fatalf("found %d example files, want 13", len(files))
	}
	v1beta2 := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), KueueV1beta2APIVersion) {
			v1beta2++
		}
		objs, err := Decode(data)
		if err == nil {
			for _, o := range objs {
				if verr := Validate(o); verr != nil {
					err = verr
				}
			}
		}
		want, isRefused := refused[filepath.Base(f)]
		switch {
		case isRefused && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: want an error containing %q, got %v", f, want, err)
		case !isRefused && err != nil:
			t.Errorf("%s: %v", f, err)
		case !isRefused && len(objs) == 0:
			t.Errorf("%s: no objects", f)
		}
	}
	if v1beta2 < 8 {
		t.Errorf("only %d examples are v1beta2; the vendored set is not current Kueue's", v1beta2)
	}
}

// TestV1beta2Converts pins each conversion against the v1beta1 document
// Kueue's conversion functions give for it, written by hand.
func TestV1beta2Converts(t *testing.T) {
	for _, tc := range []struct{ name, v1beta2, v1beta1 string }{
		{"cohortName, MayStopSearch, admission checks",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  cohortName: co\n  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}\n  admissionChecksStrategy: {admissionChecks: [{name: ac}]}\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  cohort: co\n  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}\n  admissionChecks: [ac]\n"},
		{"TryNextFlavor stays",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}\n"},
		{"workload priority class",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  queueName: q\n  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  queueName: q\n  priorityClassName: high\n  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n"},
		{"pod priority class",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: low}\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  priorityClassName: low\n  priorityClassSource: scheduling.k8s.io/priorityclass\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n"},
		{"same shape: LocalQueue",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: ns}\nspec: {clusterQueue: cq}\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: ns}\nspec: {clusterQueue: cq}\n"},
		{"exported status is ignored",
			"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq, resourceVersion: '7', uid: 0a}\nspec: {cohortName: co}\nstatus: {pendingWorkloads: 3, conditions: [{type: Active, status: 'True'}]}\n",
			"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq, resourceVersion: '7', uid: 0a}\nspec: {cohort: co}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []struct {
				name string
				fn   func([]byte) ([]Object, error)
			}{{"Decode", Decode}, {"reference", decodeReference}} {
				got, err := path.fn([]byte(tc.v1beta2))
				if err != nil {
					t.Fatalf("%s: %v", path.name, err)
				}
				want, err := decodeReference([]byte(tc.v1beta1))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-v1beta1 +converted):\n%s", path.name, diff)
				}
			}
		})
	}
}

// TestDefaultNamespace: a LocalQueue without metadata.namespace takes the
// default namespace, as kubectl gives it; one with a namespace keeps it;
// without a default it is refused as before (by Validate).
func TestDefaultNamespace(t *testing.T) {
	const lq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\nspec: {clusterQueue: cq}\n"
	const lqNS = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: team}\nspec: {clusterQueue: cq}\n"
	for _, tc := range []struct{ in, def, want string }{{lq, "default", "default"}, {lq, "ml", "ml"}, {lqNS, "default", "team"}, {lq, "", ""}} {
		for _, fn := range []func([]byte, DecodeOptions) ([]Object, error){DecodeWith, decodeReferenceWith} {
			objs, err := fn([]byte(tc.in), DecodeOptions{DefaultNamespace: tc.def})
			if err != nil {
				t.Fatal(err)
			}
			if got := objs[0].(*LocalQueue).Namespace; got != tc.want {
				t.Errorf("default %q: namespace %q, want %q", tc.def, got, tc.want)
			}
		}
	}
	objs, _ := Decode([]byte(lq))
	if Validate(objs[0]) == nil {
		t.Error("a LocalQueue without namespace and without a default must stay invalid")
	}
}

// TestConfigurationV1beta2 takes current Kueue's config.kueue.x-k8s.io/v1beta2
// Configuration: it converts to the v1beta1 document written by hand (the
// waitForPodsReady block enables it, v1beta2 has no enable), and a field
// jetqueue cannot map is refused by name.
func TestConfigurationV1beta2(t *testing.T) {
	const head = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
	const v1beta1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
	for _, tc := range []struct{ name, v1beta2, v1beta1 string }{
		{"waitForPodsReady",
			head + "waitForPodsReady:\n  timeout: 10m\n  blockAdmission: true\n  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 5, backoffBaseSeconds: 10, backoffMaxSeconds: 100}\n",
			v1beta1 + "waitForPodsReady:\n  enable: true\n  timeout: 10m\n  blockAdmission: true\n  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 5, backoffBaseSeconds: 10, backoffMaxSeconds: 100}\n"},
		{"an empty block enables it with the default timeout",
			head + "waitForPodsReady: {}\n", v1beta1 + "waitForPodsReady: {enable: true}\n"},
		{"no waitForPodsReady", head, v1beta1},
		{"exported metadata is dropped", head + "metadata: {name: default}\nwaitForPodsReady: {timeout: 1m}\n",
			v1beta1 + "waitForPodsReady: {enable: true, timeout: 1m}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := decodeReference([]byte(tc.v1beta1))
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []struct {
				name string
				fn   func([]byte) ([]Object, error)
			}{{"Decode", Decode}, {"reference", decodeReference}} {
				got, err := path.fn([]byte(tc.v1beta2))
				if err != nil {
					t.Fatalf("%s: %v", path.name, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-v1beta1 +converted):\n%s", path.name, diff)
				}
				if err := Validate(got[0]); err != nil {
					t.Errorf("%s: %v", path.name, err)
				}
			}
		})
	}
	for _, tc := range []struct {
		name, data string
		want       []FieldError
	}{
		{"recoveryTimeout", head + "waitForPodsReady: {timeout: 5m, recoveryTimeout: 3m}\n",
			[]FieldError{{"Configuration", "waitForPodsReady.recoveryTimeout", "document 1: waitForPodsReady.recoveryTimeout is a field of Kueue releases after v0.6 (PodsReady recovery timeout) that jetqueue does not implement"}}},
		{"fairSharing", head + "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}\n",
			[]FieldError{{"Configuration", "fairSharing", "document 1: fairSharing is a field of Kueue releases after v0.6 (fair sharing) that jetqueue does not implement"}}},
		{"admissionFairSharing", head + "admissionFairSharing: {usageHalfLifeTime: 1h, usageSamplingInterval: 5m}\n",
			[]FieldError{{"Configuration", "admissionFairSharing", "document 1: admissionFairSharing is a field of Kueue releases after v0.6 (admission fair sharing) that jetqueue does not implement"}}},
		{"v1beta1's enable is not a v1beta2 field", head + "waitForPodsReady: {enable: true}\n",
			[]FieldError{{"Configuration", "waitForPodsReady.enable", `document 1: unknown field "waitForPodsReady.enable"; jetqueue implements only waitForPodsReady of Kueue's Configuration`}}},
		{"another version", "apiVersion: config.kueue.x-k8s.io/v1alpha1\nkind: Configuration\n",
			[]FieldError{{"Configuration", "apiVersion", `document 1: Unsupported value: "config.kueue.x-k8s.io/v1alpha1": supported values: "config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2" (for kind Configuration)`}}},
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
