package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestSimulateOutput pins the exact stdout, stderr and exit code of
// `jqctl simulate` against golden files.
func TestSimulateOutput(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		wantCode int
	}{
		{"passing scenario prints one line per expect and one at the end", "../../conformance/kueue-public/01-basic-fit.yaml", 0},
		{"mismatch prints a diff and exits 1", "testdata/mismatch.yaml", 1},
		{"malformed step exits 2 naming the step and field", "testdata/malformed.yaml", 2},
		{"unknown top-level key exits 2", "testdata/unknown-key.yaml", 2},
		{"timers fire during advance", "../../conformance/kueue-public/74-podsready-timeout-requeue.yaml", 0},
		{"podsReady for a workload without quota warns", "testdata/podsready-pending.yaml", 0},
		{"accepted reject is a mismatch", "testdata/reject-accepted.yaml", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run([]string{"simulate", tc.file}, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			checkGolden(t, filepath.Join("testdata", strings.TrimSuffix(filepath.Base(tc.file), ".yaml")+".golden"), stdout.String(), stderr.String())
		})
	}
}
