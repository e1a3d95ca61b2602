package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/podsready"
)

// TestShardedConformanceDecidesAsOne runs every conformance scenario as 2
// and 3 admission shards in lockstep: the checkpoints (admitted with
// their flavors, pending, evicted, inactive, finished) equal the
// unsharded run's. Scenarios under waitForPodsReady.blockAdmission, which
// sharded admission does not decide (a rule over every tree at once), are
// skipped and counted.
func TestShardedConformanceDecidesAsOne(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../../conformance", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ran, blocked := 0, 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := Parse(data)
		if err != nil {
			continue
		}
		if cfg := podsready.FromAPI(sc.Configuration); cfg.Enable && cfg.BlockAdmission {
			blocked++
			continue
		}
		want, err := Run(sc)
		if err != nil {
			continue
		}
		ran++
		for _, n := range []int{2, 3} {
			// A run changes the objects it is given (an engine keeps
			// them): each run parses its own.
			sc, _ := Parse(data)
			got, err := RunSharded(sc, n)
			if err != nil {
				t.Fatalf("%s, %d shards: %v", path, n, err)
			}
			if d := cmp.Diff(want.Checkpoints, got.Checkpoints); d != "" {
				t.Errorf("%s, %d shards (-one +sharded):\n%s", path, n, d)
			}
		}
	}
	t.Logf("%d scenarios sharded, %d under blockAdmission skipped", ran, blocked)
	if ran < 100 {
		t.Fatalf("%d scenarios ran, expected hundreds", ran)
	}
}
