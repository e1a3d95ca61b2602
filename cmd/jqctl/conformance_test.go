package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformance runs every scenario of the repository's conformance/
// folder through `jqctl simulate`; each must pass.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("../../conformance/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found %d scenarios, want the public ones and ours (50+)", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{"simulate", f}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr.String())
			}
		})
	}
}
