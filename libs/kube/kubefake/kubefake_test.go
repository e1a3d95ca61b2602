package kubefake

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestWritesAreFencedByResourceVersion: every write stores a new version,
// and a write naming a stale one is refused as an API server refuses it.
func TestWritesAreFencedByResourceVersion(t *testing.T) {
	ctx := t.Context()
	jobs := NewClientset().BatchV1().Jobs("ns")
	created, err := jobs.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}}, metav1.CreateOptions{})
	if err != nil || created.ResourceVersion == "" {
		t.Fatalf("create: version %q, %v", created.ResourceVersion, err)
	}
	fenced := func(rv string) []byte {
		return []byte(`{"metadata":{"resourceVersion":"` + rv + `"},"spec":{"suspend":true}}`)
	}
	patched, err := jobs.Patch(ctx, "j", types.StrategicMergePatchType, fenced(created.ResourceVersion), metav1.PatchOptions{})
	if err != nil || patched.ResourceVersion == created.ResourceVersion || patched.Spec.Suspend == nil || !*patched.Spec.Suspend {
		t.Fatalf("patch at the current version: %+v, %v", patched, err)
	}
	for _, tc := range []struct {
		name  string
		write func() error
		want  func(error) bool
	}{
		{"patch at a stale version", func() error {
			_, err := jobs.Patch(ctx, "j", types.StrategicMergePatchType, fenced(created.ResourceVersion), metav1.PatchOptions{})
			return err
		}, apierrors.IsConflict},
		{"update of a stale read", func() error { _, err := jobs.Update(ctx, created, metav1.UpdateOptions{}); return err }, apierrors.IsConflict},
		{"status patch at a stale version", func() error {
			_, err := jobs.Patch(ctx, "j", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"`+created.ResourceVersion+`"},"status":{"active":1}}`), metav1.PatchOptions{}, "status")
			return err
		}, apierrors.IsConflict},
		{"unfenced patch", func() error {
			_, err := jobs.Patch(ctx, "j", types.MergePatchType, []byte(`{"spec":{"parallelism":2}}`), metav1.PatchOptions{})
			return err
		}, func(err error) bool { return err == nil }},
	} {
		if err := tc.write(); !tc.want(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	got, err := jobs.Get(ctx, "j", metav1.GetOptions{})
	if err != nil || got.ResourceVersion == patched.ResourceVersion || *got.Spec.Parallelism != 2 {
		t.Errorf("after an unfenced patch: version %q (was %q), %v", got.ResourceVersion, patched.ResourceVersion, err)
	}
}
