package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseFastAgrees reads every conformance scenario both ways: each one
// the reference accepts, the fast path must accept too (else it is no
// faster), and decode to the same Scenario; it may never accept what the
// reference refuses.
func TestParseFastAgrees(t *testing.T) {
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
	if len(files) < 100 {
		t.Fatalf("found %d scenarios under conformance/, expected hundreds", len(files))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ref, rerr := parseReference(data)
		fast, ferr := parseFast(data)
		switch {
		case ferr == nil && rerr != nil:
			t.Errorf("%s: the fast path accepts what the reference refuses: %v", path, rerr)
		case ferr != nil && rerr == nil:
			t.Errorf("%s: the fast path gives up on a valid scenario", path)
		case ferr == nil:
			if diff := cmp.Diff(ref, fast, cmp.AllowUnexported(Expect{})); diff != "" {
				t.Errorf("%s: (-reference +fast):\n%s", path, diff)
			}
		}
	}
}
