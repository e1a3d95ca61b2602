package purity

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	"github.com/jetqueue/jetqueue/libs/history",
	"github.com/jetqueue/jetqueue/libs/counterfactual",
	"github.com/jetqueue/jetqueue/libs/whatif",
	"github.com/jetqueue/jetqueue/libs/status",
	"github.com/jetqueue/jetqueue/libs/eta",
}

// ioImports may not be imported by any jetqueue package of the core's
// graph, nor by a third-party one outside typeLibraries.
var ioImports = []string{"net", "os", "syscall", "database/sql", "net/rpc", "net/http", "os/exec"}

// ioModules may not appear anywhere in the core's graph.
var ioModules = []string{"github.com/nats-io/", "github.com/jackc/pgx", "go.uber.org/zap"}

// typeLibraries are linked for Kubernetes' types, quantities and
// validation; some of their packages import os or net (klog's flags, the
// IP validators), which the core never calls.
var typeLibraries = []string{"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/klog/", "k8s.io/utils/",
	"golang.org/x/net/", "github.com/modern-go/"}

// clockReads are the functions of package time that read or wait on the
// wall clock.
var clockReads = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

const module = "github.com/jetqueue/jetqueue/"

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
	Standard   bool
}

// list is `go list -deps` of the given packages.
func list(t *testing.T, pkgs ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Dir,Imports,GoFiles,Standard"}, pkgs...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	var all []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return all
		} else if err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
}

// importViolations applies the import rules to a dependency graph.
func importViolations(graph []pkg) []string {
	var out []string
	for _, p := range graph {
		if hasAnyPrefix(p.ImportPath, ioModules) {
			out = append(out, "the core depends on "+p.ImportPath)
		}
		if p.Standard || (!strings.HasPrefix(p.ImportPath, module) && hasAnyPrefix(p.ImportPath, typeLibraries)) {
			continue
		}
		for _, imp := range p.Imports {
			if slices.Contains(ioImports, imp) {
				out = append(out, p.ImportPath+" imports "+imp)
			}
		}
	}
	return out
}

// clockViolations finds references to the clock-reading functions of
// package time in the non-test sources of the jetqueue packages in graph.
func clockViolations(t *testing.T, graph []pkg) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, p := range graph {
		if !strings.HasPrefix(p.ImportPath, module) {
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, clockReadsIn(fset, f)...)
		}
	}
	return out
}

func clockReadsIn(fset *token.FileSet, f *ast.File) []string {
	timeName := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" || timeName == "_" {
		return nil
	}
	if timeName == "." {
		// Its clock reads would be bare names, which a parse cannot tell
		// from the file's own.
		return []string{fmt.Sprintf("%s: dot-imports time", fset.Position(f.Package))}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && slices.Contains(clockReads, sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: time.%s", fset.Position(sel.Pos()), sel.Sel.Name))
		}
		return true
	})
	return out
}

func TestDecisionCoreImportsNoIO(t *testing.T) {
	graph := list(t, decisionPackages...)
	if n := countPrefix(graph, module); n < len(decisionPackages) {
		t.Fatalf("go list returned %d jetqueue packages, want at least %d", n, len(decisionPackages))
	}
	for _, v := range importViolations(graph) {
		t.Error(v)
	}
}

func TestDecisionCoreReadsNoClock(t *testing.T) {
	for _, v := range clockViolations(t, list(t, decisionPackages...)) {
		t.Error(v)
	}
}

// TestTheRuleCatchesEachBan runs the rule over one probe package per
// banned import and clock read (testdata/): each must be caught, naming
// what it added.
func TestTheRuleCatchesEachBan(t *testing.T) {
	probes := map[string]string{
		"net": "imports net", "os": "imports os", "syscall": "imports syscall", "sql": "imports database/sql",
		"rpc": "imports net/rpc", "http": "imports net/http", "exec": "imports os/exec",
		"nats": "depends on github.com/nats-io/", "pgx": "depends on github.com/jackc/pgx", "zap": "depends on go.uber.org/zap",
		"indirect": "imports os", "thirdparty": "go-oidc/v3/oidc imports net/http",
	}
	for _, f := range clockReads {
		probes["clock"+strings.ToLower(f)] = "time." + f
	}
	probes["clockalias"] = "time.Now"
	probes["clockdot"] = "dot-imports time"
	var roots []string
	for dir := range probes {
		roots = append(roots, "./testdata/"+dir)
	}
	graph := list(t, roots...)
	for dir, want := range probes {
		t.Run(dir, func(t *testing.T) {
			sub := reachable(graph, module+"libs/purity/testdata/"+dir)
			got := append(importViolations(sub), clockViolations(t, sub)...)
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, want) }) {
				t.Errorf("probe %s: the rule reported %q, want a violation with %q", dir, got, want)
			}
		})
	}
}

// reachable is the part of graph that root depends on, root included.
func reachable(graph []pkg, root string) []pkg {
	byPath := map[string]pkg{}
	for _, p := range graph {
		byPath[p.ImportPath] = p
	}
	seen := map[string]bool{}
	var out []pkg
	var walk func(string)
	walk = func(path string) {
		p, ok := byPath[path]
		if !ok || seen[path] {
			return
		}
		seen[path] = true
		out = append(out, p)
		for _, imp := range p.Imports {
			walk(imp)
		}
	}
	walk(root)
	return out
}

func countPrefix(graph []pkg, prefix string) int {
	n := 0
	for _, p := range graph {
		if strings.HasPrefix(p.ImportPath, prefix) {
			n++
		}
	}
	return n
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
