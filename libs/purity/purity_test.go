package purity

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// decisionPackages are the pure core: they decide over snapshots and never
// talk to the outside world.
var decisionPackages = []string{
	"github.com/jetqueue/jetqueue/libs/api",
	"github.com/jetqueue/jetqueue/libs/quota",
	"github.com/jetqueue/jetqueue/libs/queue",
	"github.com/jetqueue/jetqueue/libs/scheduler",
	"github.com/jetqueue/jetqueue/libs/engine",
	"github.com/jetqueue/jetqueue/libs/sim",
	"github.com/jetqueue/jetqueue/libs/podsready",
	"github.com/jetqueue/jetqueue/libs/scoring",
	"github.com/jetqueue/jetqueue/libs/replay",
	"github.com/jetqueue/jetqueue/libs/events",
}

// ioPackages may not appear anywhere in the core's dependency graph.
var ioPackages = []string{"github.com/nats-io/", "github.com/jackc/pgx", "go.uber.org/zap", "os/exec"}

// net/http is linked by k8s.io/api and apimachinery for their client
// helpers, which the core never calls; it may not be imported by any of our
// packages, nor by any dependency outside these type libraries.
var typeLibraries = []string{"k8s.io/api/", "k8s.io/apimachinery/", "golang.org/x/net/"}

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestDecisionCoreImportsNoIO(t *testing.T) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Standard"}, decisionPackages...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	seen := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		for _, bad := range ioPackages {
			if strings.HasPrefix(p.ImportPath, bad) {
				t.Errorf("the decision core depends on %s", p.ImportPath)
			}
		}
		for _, imp := range p.Imports {
			if imp != "net/http" || p.Standard {
				continue
			}
			if strings.HasPrefix(p.ImportPath, "github.com/jetqueue/") || !hasAnyPrefix(p.ImportPath, typeLibraries) {
				t.Errorf("%s imports net/http", p.ImportPath)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if seen < len(decisionPackages) {
		t.Fatalf("go list returned %d packages, want at least %d", seen, len(decisionPackages))
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
