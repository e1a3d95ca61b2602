package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestErrorsFormatAndShape(t *testing.T) {
	errs := Errors{
		{Object: "ClusterQueue/cq-a", Field: "spec.cohort", Message: "Required value"},
		{Object: "document 2", Message: "must be an object with apiVersion and kind"},
	}
	if got, want := errs.Error(), "ClusterQueue/cq-a: spec.cohort: Required value; document 2: must be an object with apiVersion and kind"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	b, _ := json.Marshal(map[string]Errors{"errors": errs[:1]})
	if got, want := string(b), `{"errors":[{"object":"ClusterQueue/cq-a","field":"spec.cohort","message":"Required value"}]}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestErrUnsupportedKindSurvivesWrappingAndJSON(t *testing.T) {
	_, err := Decode([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"))
	wrapped := fmt.Errorf("apply: %w", err)
	if !errors.Is(wrapped, ErrUnsupportedKind) {
		t.Fatalf("errors.Is through a wrap failed: %v", wrapped)
	}
	var back Errors
	b, _ := json.Marshal(err)
	if json.Unmarshal(b, &back) != nil || !errors.Is(back, ErrUnsupportedKind) {
		t.Errorf("classification lost in a JSON round trip: %s", b)
	}
	var fe FieldError
	if !errors.As(err, &fe) || fe.Field != "kind" {
		t.Errorf("errors.As FieldError: %+v", fe)
	}
}

func TestObjectRefAndNamespacedName(t *testing.T) {
	for _, tc := range []struct {
		obj  Object
		want string
	}{
		{&ClusterQueue{ObjectMeta: objMeta("cq-a")}, "ClusterQueue/cq-a"},
		{&ResourceFlavor{ObjectMeta: objMeta("rf")}, "ResourceFlavor/rf"},
		{&WorkloadPriorityClass{ObjectMeta: objMeta("p")}, "WorkloadPriorityClass/p"},
		{&PriorityClass{ObjectMeta: objMeta("p")}, "PriorityClass/p"},
		{&LocalQueue{ObjectMeta: nsMeta("team-a", "lq")}, "LocalQueue/team-a/lq"},
		{&Workload{ObjectMeta: nsMeta("ns", "wl")}, "Workload/ns/wl"},
		{&Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "j-"}}, "Job/ns/j-"},
		{&Configuration{}, "Configuration"},
		{&corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod"}, ObjectMeta: nsMeta("ns", "p")}, "Pod/ns/p"},
		{(*ClusterQueue)(nil), "ClusterQueue"},
	} {
		if got := ObjectRef(tc.obj); got != tc.want {
			t.Errorf("ObjectRef = %q, want %q", got, tc.want)
		}
	}
	if got := NamespacedName("ns", "n"); got != "ns/n" {
		t.Errorf("NamespacedName = %q", got)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	objs := mustDecode(t, multiDocYAML+"---\n"+sampleJob)
	objs = append(objs, baseWL(func(w *Workload) {
		w.Spec.Priority = ptr[int32](3)
		w.Spec.PodSets[0].MinCount = ptr[int32](1)
	}), baseRF())
	for _, o := range objs {
		c := o.DeepCopyObject()
		if diff := cmp.Diff(o, c); diff != "" {
			t.Errorf("DeepCopy(%s) differs:\n%s", ObjectRef(o), diff)
		}
		before, _ := json.Marshal(o)
		scribble(c)
		after, _ := json.Marshal(o)
		if string(before) != string(after) {
			t.Errorf("mutating the copy of %s changed the original", ObjectRef(o))
		}
	}
}

// scribble mutates everything reachable through pointers, maps and slices.
func scribble(o Object) {
	switch c := o.(type) {
	case *ClusterQueue:
		c.Labels = map[string]string{"x": "y"}
		rq := &c.Spec.ResourceGroups[0].Flavors[0].Resources[0]
		rq.NominalQuota.Add(q("1"))
		rq.LendingLimit.Add(q("1"))
		c.Spec.ResourceGroups[0].CoveredResources[0] = "x"
		c.Spec.Preemption.BorrowWithinCohort.Policy = "x"
		c.Spec.FlavorFungibility.WhenCanBorrow = "x"
		*c.Spec.StopPolicy = "x"
		c.Spec.NamespaceSelector.MatchLabels = map[string]string{"a": "b"}
	case *ResourceFlavor:
		c.Spec.NodeLabels["x"] = "y"
		if len(c.Spec.NodeTaints) > 0 {
			c.Spec.NodeTaints[0].Key = "x"
			c.Spec.Tolerations[0].Key = "x"
		}
	case *Workload:
		*c.Spec.Priority = 9
		*c.Spec.Active = false
		*c.Spec.PodSets[0].MinCount = 9
		c.Spec.PodSets[0].Template.Spec.Containers[0].Name = "x"
	case *Configuration:
		*c.WaitForPodsReady.RequeuingStrategy.BackoffLimitCount = 99
		c.WaitForPodsReady.Timeout.Duration = 1
		*c.WaitForPodsReady.BlockAdmission = false
	case *LocalQueue:
		c.Spec.ClusterQueue = "x"
		c.Name = "x"
	case *WorkloadPriorityClass:
		c.Value = 1
	case *PriorityClass:
		c.Value = 1
	case *Job:
		c.Labels["x"] = "y"
	}
}
