package counterfactual

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
)

// TestTrimmedSearchAsWhole: random cohorts of StrictFIFO and
// BestEffortFIFO queues, some preempting, with backlogs beyond their
// quota; searches whose probes run on trimmed copies (engine.Trim) give
// the very answers of searches on whole copies.
func TestTrimmedSearchAsWhole(t *testing.T) {
	defer func() { trimProbes = true }()
	searched, trimmedStates, withChanges := 0, 0, 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 31))
		config := rf
		queues := 2 + rng.IntN(2)
		for q := range queues {
			var extra []string
			if rng.IntN(3) == 0 {
				extra = append(extra, fmt.Sprintf("bl=%d", rng.IntN(4)))
			}
			nominal := 4 + rng.IntN(7)
			if rng.IntN(3) == 0 {
				extra = append(extra, fmt.Sprintf("ll=%d", rng.IntN(nominal+1)))
			}
			def := cq(fmt.Sprintf("q%d", q), "c", []string{"Never", "LowerPriority"}[rng.IntN(2)], flavor("rf", fmt.Sprint(nominal), extra...))
			if rng.IntN(4) != 0 {
				def = strings.Replace(def, "  namespaceSelector: {}\n", "  namespaceSelector: {}\n  queueingStrategy: StrictFIFO\n", 1)
			}
			config += def
		}
		w := newWorld(t, config)
		for i := range 30 + rng.IntN(50) {
			w.submit(wl(fmt.Sprintf("q%d", rng.IntN(queues)), fmt.Sprintf("w%d", i), fmt.Sprint(1+rng.IntN(4)), int32(rng.IntN(4))))
		}
		st, err := history.Fold(w.rec.Log, w.at)
		if err != nil {
			t.Fatal(err)
		}
		var pending []string
		for _, k := range sortedKeys(st.Engine.Workloads()) {
			if st.Engine.Workload(k).Status == engine.Pending {
				pending = append(pending, k)
			}
		}
		for range min(3, len(pending)) {
			key := pending[rng.IntN(len(pending))]
			if len(st.Engine.Unreachable(key, w.at.Add(1e9))) > 0 {
				trimmedStates++
			}
			trimProbes = false
			whole, _ := json.Marshal(w.search(key))
			trimProbes = true
			trimmed, _ := json.Marshal(w.search(key))
			if string(whole) != string(trimmed) {
				t.Fatalf("seed %d, %s: trimmed probes answer\n%s\nwhole ones\n%s", seed, key, trimmed, whole)
			}
			searched++
			if !strings.Contains(string(whole), `"changes":[]`) {
				withChanges++
			}
		}
	}
	t.Logf("%d searches, %d of them on trimmed copies, %d finding changes", searched, trimmedStates, withChanges)
	if trimmedStates < 30 || withChanges < 30 {
		t.Fatalf("only %d searches had anything trimmed: the test does not reach Trim", trimmedStates)
	}
}
