// Package kubefake is client-go's fake clientset with the one behaviour of
// an API server that optimistic concurrency rests on and the fake lacks:
// resourceVersions. Tests of code that patches objects fenced by the
// version it read (and retries on conflict) use it, so that a stale read
// is refused as a real API server refuses it.
package kubefake

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns a fake clientset holding objs in which every write
// stores a new resourceVersion, and a write whose object (update) or patch
// (metadata.resourceVersion) names another version than the stored one
// fails with a conflict.
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	tracker := c.Tracker()
	var version atomic.Uint64
	next := func() string { return strconv.FormatUint(version.Add(1), 10) }
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		gvr, ns := a.GetResource(), a.GetNamespace()
		switch a.GetVerb() {
		case "create":
			obj := a.(k8stesting.CreateAction).GetObject().DeepCopyObject()
			if err := setVersion(obj, next()); err != nil {
				return true, nil, err
			}
			if a.GetSubresource() != "" {
				return false, nil, nil
			}
			return k8stesting.ObjectReaction(tracker)(k8stesting.NewCreateAction(gvr, ns, obj))
		case "update":
			obj := a.(k8stesting.UpdateAction).GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			if err := precondition(tracker, a, m.GetName(), m.GetResourceVersion()); err != nil {
				return true, nil, err
			}
			m.SetResourceVersion(next())
			return k8stesting.ObjectReaction(tracker)(k8stesting.NewUpdateSubresourceAction(gvr, a.GetSubresource(), ns, obj))
		case "patch":
			p := a.(k8stesting.PatchAction)
			if p.GetPatchType() != types.StrategicMergePatchType && p.GetPatchType() != types.MergePatchType {
				return false, nil, nil
			}
			var patch map[string]any
			if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
				return true, nil, apierrors.NewBadRequest(err.Error())
			}
			md, _ := patch["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				patch["metadata"] = md
			}
			want, _ := md["resourceVersion"].(string)
			if err := precondition(tracker, a, p.GetName(), want); err != nil {
				return true, nil, err
			}
			md["resourceVersion"] = next()
			body, err := json.Marshal(patch)
			if err != nil {
				return true, nil, err
			}
			return k8stesting.ObjectReaction(tracker)(k8stesting.NewPatchSubresourceAction(gvr, ns, p.GetName(), p.GetPatchType(), body, a.GetSubresource()))
		}
		return false, nil, nil
	})
	return c
}

// precondition refuses a write that names a version other than the
// stored one; a write naming none is unconditional, as on a server.
func precondition(tracker k8stesting.ObjectTracker, a k8stesting.Action, name, want string) error {
	if want == "" {
		return nil
	}
	cur, err := tracker.Get(a.GetResource(), a.GetNamespace(), name)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(cur)
	if err != nil {
		return err
	}
	if m.GetResourceVersion() != want {
		return apierrors.NewConflict(a.GetResource().GroupResource(), name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}

func setVersion(obj runtime.Object, v string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetResourceVersion(v)
	return nil
}
