package api

import (
	"errors"
	"testing"
)

// FuzzDecode asserts that nothing reachable from untrusted bytes panics:
// Decode, then Validate, PodRequests, RequestsExceedLimits, JobToWorkload and
// DeepCopy on whatever decoded, and that errors keep their contract.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		singleClusterQueueSetup,
		sampleJob,
		multiDocYAML,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"namespace":"a","name":"w"},"spec":{"podSets":[{"count":2,"minCount":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`,
		`[{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"a"}}]}]`,
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: c}\nspec:\n  cohort: x\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 1, lendingLimit: 2, borrowingLimit: -1}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
		"a: &a [*a, *a]\n",
		"---\n- 1\n---\nnull\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode(data)
		if err != nil {
			if errs, ok := err.(Errors); !ok || len(errs) == 0 {
				t.Fatalf("Decode error %T %v is not a non-empty Errors", err, err)
			}
			_ = errors.Is(err, ErrUnsupportedKind)
		}
		for _, o := range objs {
			if o == nil {
				t.Fatal("nil object")
			}
			if verr := Validate(o); verr != nil {
				if errs, ok := verr.(Errors); !ok || len(errs) == 0 {
					t.Fatalf("Validate error %T is not a non-empty Errors", verr)
				}
			}
			_ = ObjectRef(o)
			_ = o.DeepCopyObject()
			Default(o)
			switch x := o.(type) {
			case *Workload:
				for i := range x.Spec.PodSets {
					PodRequests(&x.Spec.PodSets[i].Template.Spec)
					RequestsExceedLimits(&x.Spec.PodSets[i].Template.Spec)
				}
				_ = WorkloadPriority(x)
			case *Job:
				if wl, err := JobToWorkload(x, classes); err == nil {
					_ = Validate(wl)
					PodRequests(&wl.Spec.PodSets[0].Template.Spec)
				}
			}
		}
	})
}
