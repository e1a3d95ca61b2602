package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/sim"
)

// TestConformance runs every scenario of the repository's conformance/
// folder through `jqctl simulate`. A scenario that needs a feature not built
// yet must be refused with exit 2 ("not supported yet"), never pass.
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
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := sim.Parse(data)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"simulate", f}, &stdout, &stderr)
			if sim.Unsupported(sc) != nil {
				if code != 2 || !strings.Contains(stderr.String(), "not supported yet") {
					t.Fatalf("unsupported scenario: exit %d, stderr %q; want exit 2 saying not supported yet", code, stderr.String())
				}
				t.Skipf("needs a feature not built yet: %v", sim.Unsupported(sc))
			}
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr.String())
			}
		})
	}
}
