package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkGolden compares a command's output with its golden file, or
// rewrites the file under -update.
func checkGolden(t *testing.T, golden, stdout, stderr string) {
	t.Helper()
	got := "-- stdout --\n" + stdout + "-- stderr --\n" + stderr
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, d)
	}
}
