package e2e

import (
	"encoding/json"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/sim"
)

// TestConformanceEndToEnd plays every scenario as a plain client of
// `jqctl dev --manual-clock` does: every service runs (the scorer too),
// the Configuration and objects go through POST /v1/apply, each step
// through the HTTP API, and `advance` through POST
// /v1/debug/clock/advance, which moves the one clock every service reads,
// stopping at every timer on the way.
//
// The services run each decision to rest (engine.RunToRest), as Kueue's
// scheduler never stops; FORMAT.md's rule ends a run at a repeated state.
// A scenario whose expect catches a workload that rule left pending with
// its quota free (sim.LeftBehind names it, and libs/sim's tests list every
// such conformance scenario) is checked against the simulator run to rest
// at its expect steps instead, in full.
func TestConformanceEndToEnd(t *testing.T) {
	for name, sc := range scenarios(t, "../conformance/*/*.yaml") {
		left, err := sim.LeftBehind(sc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if left != nil {
				t.Logf("checked against the simulator run to rest: %s", left.Mismatches[0])
				expectAll(sc, left)
			}
			play(t, sc)
		})
	}
}

// scenarios reads and parses every scenario file matching pattern, by
// name (the file's, without .yaml), in the order of the files.
func scenarios(t *testing.T, pattern string) iter.Seq2[string, *sim.Scenario] {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios match %s: %v", pattern, err)
	}
	return func(yield func(string, *sim.Scenario) bool) {
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := sim.Parse(data)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !yield(strings.TrimSuffix(filepath.Base(f), ".yaml"), sc) {
				return
			}
		}
	}
}

// expectAll makes every expect step of sc check, in full, what res
// observed there.
func expectAll(sc *sim.Scenario, res *sim.Result) {
	for _, cp := range res.Checkpoints {
		if cp.Step < len(sc.Steps) && sc.Steps[cp.Step].Expect != nil {
			sc.Steps[cp.Step].Expect = sim.ExpectOf(cp)
		}
	}
}

func play(t *testing.T, sc *sim.Scenario) { playWith(t, startClient(t), sc, nil) }

// playWith plays a scenario on a running system; between sends the step
// and waits for its consequences, so a test can interrupt a service while
// it works.
func playWith(t *testing.T, s *system, sc *sim.Scenario, between func(step int)) {
	var docs [][]byte
	if sc.Configuration != nil {
		docs = append(docs, marshal(t, sc.Configuration))
	}
	for _, o := range sc.Objects {
		docs = append(docs, marshal(t, o))
	}
	if len(docs) > 0 {
		s.must(http.StatusOK, "POST", "/v1/apply", list(docs...))
	}
	s.sync()
	var lastExpect uint64
	s.evictedSince(&lastExpect)
	// The shared clock, as the advances sent have moved it. No service
	// may stamp an event later: each reads this clock, and none takes
	// its time from an event (a wall-clock stamp would carry every later
	// decision to today's date).
	now := clock0
	stamped := func(step int) {
		if s.latest.at.After(now) {
			t.Errorf("steps[%d]: %s stamped %s, after the shared clock's %s", step, s.latest.what,
				s.latest.at.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		}
	}
	for i, st := range sc.Steps {
		switch {
		case len(st.Submit) == 1:
			s.must(http.StatusAccepted, "POST", "/v1/workloads", marshal(t, st.Submit[0]))
		case st.Submit != nil:
			// One request, so that admission considers them in one cycle
			// as the simulator does.
			var docs [][]byte
			for _, o := range st.Submit {
				docs = append(docs, marshal(t, o))
			}
			s.must(http.StatusAccepted, "POST", "/v1/workloads", list(docs...))
		case st.Apply != nil:
			var docs [][]byte
			for _, o := range st.Apply {
				docs = append(docs, marshal(t, o))
			}
			s.must(http.StatusOK, "POST", "/v1/apply", list(docs...))
		// Several changes in one step are sent as one batch (JQ-Batch), so
		// that admission decides once they have all arrived, as the
		// simulator does after the step.
		case st.Delete != nil:
			b := s.batch(i, len(st.Delete))
			for _, k := range st.Delete {
				s.mustBatch(b, http.StatusAccepted, "DELETE", "/v1/workloads/"+k, nil)
			}
		case st.Finish != nil:
			b := s.batch(i, len(st.Finish))
			for _, k := range st.Finish {
				s.mustBatch(b, http.StatusAccepted, "POST", "/v1/workloads/"+k+"/finish", []byte(`{"succeeded":true}`))
			}
		case st.SetPriority != nil:
			b := s.batch(i, len(st.SetPriority))
			for _, k := range sortedKeys(st.SetPriority) {
				body, _ := json.Marshal(map[string]int32{"priority": st.SetPriority[k]})
				s.mustBatch(b, http.StatusAccepted, "POST", "/v1/workloads/"+k+"/priority", body)
			}
		case st.PodsReady != nil:
			b := s.batch(i, len(st.PodsReady))
			for _, k := range st.PodsReady {
				// PodsReady for a workload without quota is accepted and
				// ignored by the services, as the simulator ignores it.
				s.mustBatch(b, http.StatusAccepted, "POST", "/v1/workloads/"+k+"/podsready", nil)
			}
		case st.Advance != nil:
			body, _ := json.Marshal(map[string]string{"duration": st.Advance.String()})
			s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", body)
			now = now.Add(*st.Advance)
		case st.Reject != nil:
			for j, d := range st.Reject {
				path := "/v1/apply"
				if kind := kindOf(d); kind == api.KindWorkload || kind == api.KindJob {
					path = "/v1/workloads"
				}
				if code := s.call("POST", path, d, nil); code < 400 || code >= 500 {
					t.Errorf("steps[%d].reject[%d]: status %d, want a 4xx refusal", i, j, code)
				}
			}
		case st.Expect != nil:
			cp := checkpoint(i, s.workloads())
			cp.Evicted = s.evictedSince(&lastExpect)
			for _, m := range sim.Check(i, st.Expect, cp) {
				t.Error(m)
			}
			stamped(i)
		}
		if between != nil {
			between(i)
		}
		// The simulator runs to quiescence after every step.
		s.sync()
	}
	s.evictedSince(&lastExpect)
	stamped(len(sc.Steps))
}

func checkpoint(step int, views []view) sim.Checkpoint {
	cp := sim.Checkpoint{Step: step, Admitted: map[string]map[string]map[string]string{}, Evicted: map[string]string{},
		Pending: []string{}, Inactive: []string{}, Finished: []string{}, PodCounts: map[string]map[string]int32{}}
	for _, v := range views {
		key := v.Namespace + "/" + v.Name
		switch v.Status {
		case "admitted":
			cp.Admitted[key] = v.Assignment
			cp.PodCounts[key] = v.PodCounts
		case "pending":
			cp.Pending = append(cp.Pending, key)
		case "inactive":
			cp.Inactive = append(cp.Inactive, key)
		case "finished":
			cp.Finished = append(cp.Finished, key)
		}
	}
	slices.Sort(cp.Pending)
	slices.Sort(cp.Inactive)
	slices.Sort(cp.Finished)
	return cp
}

func marshal(t *testing.T, o any) []byte {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kindOf(doc []byte) string {
	var tm struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(doc, &tm)
	return tm.Kind
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
