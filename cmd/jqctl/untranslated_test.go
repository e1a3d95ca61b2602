package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestKubectlDoesNotTranslateAtInit: kubectl's get package (linked for
// its custom-columns printer) allocates a few kilobytes at init, not the
// megabytes of loading its translation catalogue (internal/untranslated).
// It reads the runtime's init trace of this test binary run again.
func TestKubectlDoesNotTranslateAtInit(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`init k8s\.io/kubectl/pkg/cmd/get @[^,]*, [^,]* clock, (\d+) bytes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init trace of k8s.io/kubectl/pkg/cmd/get in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n > 256<<10 {
		t.Errorf("kubectl's get package allocated %d bytes at init, want at most 256 KiB (translations loaded?)", n)
	}
}
