package api

import (
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func qp(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func ptr[T any](v T) *T { return &v }

// Messages Kubernetes' validation library produces for a bad name; spelled
// out by the library so the tests pin our paths, not its prose.
var (
	dnsSubdomainMsg = validation.IsDNS1123Subdomain("Bad_Name")[0]
	dnsLabelMsg     = validation.IsDNS1123Label("Bad_Name")[0]
	qualifiedMsg    = validation.IsQualifiedName("bad key!")[0]
	labelValueMsg   = validation.IsValidLabelValue("bad value!")[0]
)

// asErrors turns an error from this package into its FieldErrors so a test
// can cmp.Diff them; nil stays nil.
func asErrors(t *testing.T, err error) []FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	errs, ok := err.(Errors)
	if !ok {
		t.Fatalf("error %T is not Errors: %v", err, err)
	}
	if len(errs) == 0 {
		t.Fatalf("non-nil empty Errors")
	}
	return errs
}

func diffErrors(t *testing.T, want []FieldError, err error) {
	t.Helper()
	if diff := cmp.Diff(want, asErrors(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func container(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podTemplate(cs ...corev1.Container) corev1.PodTemplateSpec {
	if len(cs) == 0 {
		cs = []corev1.Container{container(corev1.ResourceList{"cpu": q("1")}, nil)}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs, RestartPolicy: corev1.RestartPolicyNever}}
}

func objMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func nsMeta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func jobSpec(parallelism int32, completions *int32) batchv1.JobSpec {
	return batchv1.JobSpec{Parallelism: &parallelism, Completions: completions, Template: podTemplate()}
}

func equalJSON(t *testing.T, a, b interface{}) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
