package deploy

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files (docs/configuration.md) instead of comparing")

// repoRoot is the repository's root: this module lives in deploy/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// binaries are the names of everything the images carry.
func binaries() []string {
	out := []string{"jqctl"}
	for _, s := range Services {
		out = append(out, s.Name)
	}
	return out
}

// addrPort is the port of a listen address such as ":9090".
func addrPort(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return port
}

// checkEnv reports variables a binary would not read: a typo there is a
// setting silently ignored.
func checkEnv(t *testing.T, where, binary string, names []string) {
	t.Helper()
	var known map[string]string
	if s, ok := ServiceByName(binary); ok {
		known = s.Env()
	} else if binary == "jqctl" {
		known = JQCTLEnv
	} else {
		t.Errorf("%s: unknown binary %q", where, binary)
		return
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			t.Errorf("%s: %s is not read by %s (no such flag)", where, n, binary)
		}
	}
}

func parsePort(t *testing.T, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	return uint32(n)
}
