package engine

import (
	"encoding/json"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestPingPongEndsWithNothingThatFits drives Kueue v0.6's preempt/re-admit
// livelock (testdata/pingpong.yaml, from the differential tester's
// reproducers): the preemptor evicts a borrowing workload, which is
// admitted again before the preemptor, for ever. A run must end, and it
// must not end right after an eviction with the victim and its preemptor
// both pending while their quota is free: whatever a cycle could still
// admit without preempting must be admitted before the run ends.
func TestPingPongEndsWithNothingThatFits(t *testing.T) {
	data, err := os.ReadFile("testdata/pingpong.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Objects []json.RawMessage `json:"objects"`
		Steps   []struct {
			Apply  []json.RawMessage `json:"apply"`
			Submit []json.RawMessage `json:"submit"`
		} `json:"steps"`
	}
	if err := yaml.Unmarshal(data, &sc); err != nil {
		t.Fatal(err)
	}
	e := New()
	for _, o := range sc.Objects {
		apply(t, e, string(o))
	}
	evictions := 0
	for _, st := range sc.Steps {
		for _, o := range st.Apply {
			apply(t, e, string(o))
		}
		for _, o := range st.Submit {
			submit(t, e, string(o))
		}
		e.RunToQuiescence(t0)
		evictions += len(e.DrainEvictions())
	}
	if evictions == 0 {
		t.Fatal("no eviction: the scenario did not reach its ping-pong")
	}
	// One more cycle, preemption aside: it must find nothing to admit.
	e.noPreemption = true
	if res := e.Cycle(t0); len(res.Admitted) > 0 {
		t.Errorf("the run ended with %v pending although they fit (after %d evictions)", res.Admitted, evictions)
	}
}
