package counterfactual

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
)

// TestBudgetBoundsTheSearch, over random cohorts with backlogs: one probe
// worker answers as several do; a search whose Stop answers an error
// after n probes ends with that error, asked no more and running no
// further probe; a search given fewer probes than it needs says it was
// cut short.
func TestBudgetBoundsTheSearch(t *testing.T) {
	gone := errors.New("the client left")
	stopped, cut := 0, 0
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		config := rf
		for q := range 3 {
			config += cq(fmt.Sprintf("q%d", q), "c", []string{"Never", "LowerPriority"}[rng.IntN(2)], flavor("rf", fmt.Sprint(4+rng.IntN(5))))
		}
		w := newWorld(t, config)
		for i := range 30 + rng.IntN(30) {
			w.submit(wl(fmt.Sprintf("q%d", rng.IntN(3)), fmt.Sprintf("w%d", i), fmt.Sprint(1+rng.IntN(4)), int32(rng.IntN(4))))
		}
		st, err := history.Fold(w.rec.Log, w.at)
		if err != nil {
			t.Fatal(err)
		}
		var key string
		for _, k := range sortedKeys(st.Engine.Workloads()) {
			if st.Engine.Workload(k).Status == engine.Pending {
				key = k
			}
		}
		build := history.Builder(w.rec.Log, time.Time{})
		now := w.at.Add(time.Second)
		search := func(b Budget) (Result, error) { return SearchWithin(build, key, now, b) }
		free, err := search(Budget{})
		if err != nil {
			t.Fatal(err)
		}
		one, err := search(Budget{Workers: 1})
		if a, b := js(free), js(one); err != nil || a != b {
			t.Fatalf("seed %d: one worker answers %s (%v), several %s", seed, b, err, a)
		}
		if free.Probes < 3 {
			continue
		}
		after := free.Probes / 2
		var mu sync.Mutex
		asked := 0
		_, err = search(Budget{Stop: func() error {
			mu.Lock()
			defer mu.Unlock()
			if asked++; asked > after {
				return gone
			}
			return nil
		}})
		// The first question is asked before the search's own copy.
		if !errors.Is(err, gone) || asked != after+1 {
			t.Fatalf("seed %d: stopped after %d: %v after %d questions", seed, after, err, asked)
		}
		stopped++
		short, err := search(Budget{Probes: free.Probes - 1})
		if err != nil || !short.Exhausted || short.Probes > free.Probes-1 {
			t.Fatalf("seed %d: %d probes of %d: %+v %v", seed, short.Probes, free.Probes-1, short, err)
		}
		cut++
	}
	if stopped < 6 || cut < 6 {
		t.Fatalf("%d searches stopped, %d cut short: the worlds are too easy", stopped, cut)
	}
}

func js(r Result) string {
	b, _ := json.Marshal(r)
	return string(b)
}
