package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

const scorerVectors = "../../conformance/scorer"

// TestScoreVectors runs every scorer vector of conformance/scorer/ (the
// public ones and ours) through `jqctl score`; each must pass its own
// expectations.
func TestScoreVectors(t *testing.T) {
	count := map[string]int{}
	err := filepath.WalkDir(scorerVectors, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".json", ".yaml", ".yml":
		default:
			return nil
		}
		count[filepath.Base(filepath.Dir(path))]++
		rel, _ := filepath.Rel(scorerVectors, path)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte("expected")) {
				t.Fatalf("vector checks nothing: no expected or expectedOrder")
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"score", path}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr.String())
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count["public"] < 6 || count["jetqueue"] < 30 {
		t.Errorf("found %v vectors, want the 6 public ones and 30+ of ours", count)
	}
}

// TestScoreOutput pins the exact stdout, stderr and exit code of
// `jqctl score` against testdata/score-*.golden.
func TestScoreOutput(t *testing.T) {
	cases := []struct {
		name     string
		golden   string
		files    []string
		wantCode int
	}{
		{"passing vector prints its ranking best first", "ranking",
			[]string{scorerVectors + "/jetqueue/40-cpu-pod-across-cpu-and-gpu-nodes.json"}, 0},
		{"one line per file; a mismatch in one makes the run exit 1", "two-files",
			[]string{scorerVectors + "/public/tie-break-by-node-name.json", "testdata/score-mismatch.json"}, 1},
		{"mismatches print a plain-text diff and exit 1", "mismatch",
			[]string{"testdata/score-mismatch.json"}, 1},
		{"every invalid config field is named and exits 2", "invalid-config",
			[]string{"testdata/score-invalid-config.json"}, 2},
		{"bad quantity names the node and resource and exits 2", "bad-quantity",
			[]string{"testdata/score-bad-quantity.yaml"}, 2},
		{"negative quantity exits 2", "negative-quantity",
			[]string{"testdata/score-negative-quantity.json"}, 2},
		{"misspelt field exits 2", "unknown-field",
			[]string{"testdata/score-unknown-field.json"}, 2},
		{"non-integer weight exits 2", "weight-not-integer",
			[]string{"testdata/score-weight-not-integer.json"}, 2},
		{"duplicate node name exits 2", "duplicate-node",
			[]string{"testdata/score-duplicate-node.json"}, 2},
		{"unreadable file exits 2 and the others still run", "missing-file",
			[]string{"testdata/score-no-such-file.json", scorerVectors + "/public/single-node.json"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"score"}, tc.files...), &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			checkGolden(t, filepath.Join("testdata", "score-"+tc.golden+".golden"), stdout.String(), stderr.String())
		})
	}
}

// TestScoreNeedsAFile keeps the cobra arity check.
func TestScoreNeedsAFile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"score"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "requires at least 1 arg") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// FuzzScoreVector: no input makes parsing, validation or ranking panic.
func FuzzScoreVector(f *testing.F) {
	for _, glob := range []string{scorerVectors + "/*/*", "testdata/score-*.json", "testdata/score-*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"pod":{"requests":{"memory":"1e100"}},"nodes":[{"name":"a","allocatable":{"memory":"9e18"}}],"config":{"fitPlus":{"memory":{"type":"MostAllocated","weight":2147483647}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseVector(data)
		if err != nil {
			return
		}
		s, err := scoring.New(v.config)
		if err != nil {
			return
		}
		v.check(s.Rank(&v.pod, v.nodes))
	})
}
