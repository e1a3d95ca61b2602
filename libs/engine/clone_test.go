package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
)

// TestChangesLeaveTheSubmittedObject: SetActive and SetPriority replace
// a workload's object, which the submitter may share, rather than write
// it.
func TestChangesLeaveTheSubmittedObject(t *testing.T) {
	for name, change := range map[string]func(e *Engine, key string) error{
		"SetActive":   func(e *Engine, key string) error { return e.SetActive(key, false, t0) },
		"SetPriority": func(e *Engine, key string) error { return e.SetPriority(key, 7, t0) },
	} {
		e := New()
		apply(t, e, podsReadyWorld)
		wl := decodeValid(t, cpuWorkload("cq-a", "w", 2))[0].(*api.Workload)
		if _, err := e.Submit(wl, t0); err != nil {
			t.Fatal(err)
		}
		before := wl.DeepCopy()
		must(t, change(e, "cq-a/w"))
		if d := cmp.Diff(before, wl); d != "" {
			t.Errorf("%s changed the submitted object (-before +after):\n%s", name, d)
		}
		if o := e.Workload("cq-a/w").Object; cmp.Equal(before, o) {
			t.Errorf("%s left the engine's object as it was", name)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
