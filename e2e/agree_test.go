package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jetqueue/jetqueue/libs/sim"
)

// TestServicesAgreeWithSimulator plays every scenario of $JQ_AGREE_DIR on
// the whole system, as TestConformanceEndToEnd plays the conformance
// scenarios, and checks at each expect step that the services observe in
// full (admitted with flavors and pod counts, pending, evicted, inactive,
// finished) what the simulator's run of the same file to rest
// (sim.RunAtRest, as admission decides) observed there.
// `make services-vs-simulator` fills the directory with random scenarios
// from the difftest generator, which check the simulator against Kueue;
// this checks the services against the simulator. Without the variable
// it skips: CI runs the conformance scenarios, which hold the reproducers
// this found. JQ_AGREE_SHARDS=N runs admission as N shards instead (a
// scenario with waitForPodsReady.blockAdmission is skipped: sharded
// admission decides nothing under it).
func TestServicesAgreeWithSimulator(t *testing.T) {
	dir := os.Getenv("JQ_AGREE_DIR")
	if dir == "" {
		t.Skip("JQ_AGREE_DIR is not set (make services-vs-simulator sets it)")
	}
	shards := 0
	if v := os.Getenv("JQ_AGREE_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("JQ_AGREE_SHARDS=%q: want a count of shards", v)
		}
		shards = n
	}
	for name, sc := range scenarios(t, filepath.Join(dir, "*.yaml")) {
		want, err := sim.RunAtRest(sc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		expectAll(sc, want)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if shards == 0 {
				play(t, sc)
				return
			}
			// BlockAdmission defaults to Enable.
			if c := sc.Configuration; c != nil && c.WaitForPodsReady != nil && c.WaitForPodsReady.Enable &&
				(c.WaitForPodsReady.BlockAdmission == nil || *c.WaitForPodsReady.BlockAdmission) {
				t.Skip("blockAdmission: sharded admission decides nothing")
			}
			playWith(t, startShards(t, shards), sc, nil)
		})
	}
}
