package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"golang.org/x/mod/modfile"
)

// parseDockerfile parses the repository's Dockerfile with BuildKit's own
// parser into stages.
func parseDockerfile(t *testing.T) []instructions.Stage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return stages
}

func dockerfileTargets(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, s := range parseDockerfile(t) {
		out[s.Name] = true
	}
	return out
}

// stageChain is a stage and the stages it is built on, nearest first.
func stageChain(stages []instructions.Stage, i int) []instructions.Stage {
	var chain []instructions.Stage
	for i >= 0 {
		chain = append(chain, stages[i])
		base := stages[i].BaseName
		i = slices.IndexFunc(stages, func(s instructions.Stage) bool { return s.Name == base })
	}
	return chain
}

// effectiveUser is the USER a stage's containers run as ("" if none is set).
func effectiveUser(chain []instructions.Stage) string {
	for _, s := range chain {
		for j := len(s.Commands) - 1; j >= 0; j-- {
			if u, ok := s.Commands[j].(*instructions.UserCommand); ok {
				return u.User
			}
		}
	}
	return ""
}

func rootUser(u string) bool {
	name, _, _ := strings.Cut(u, ":")
	return name == "" || name == "root" || name == "0"
}

// TestDockerfile: the images run as non-root on distroless, and every
// binary has its target with its entrypoint and health check.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	byName := map[string]int{}
	for i, s := range stages {
		byName[s.Name] = i
	}

	// The default target (the last stage) and every binary's target run as
	// non-root on the distroless static base.
	last := stages[len(stages)-1].Name
	for _, target := range append([]string{last}, binaries()...) {
		i, ok := byName[target]
		if !ok {
			t.Errorf("no stage %q", target)
			continue
		}
		chain := stageChain(stages, i)
		if u := effectiveUser(chain); rootUser(u) {
			t.Errorf("stage %s runs as %q, want a non-root USER", target, u)
		}
		if base := chain[len(chain)-1].BaseName; !strings.HasPrefix(base, "gcr.io/distroless/static") {
			t.Errorf("stage %s is built on %s, want gcr.io/distroless/static", target, base)
		}
	}

	// The build stage: static binaries, every one of them.
	build := stages[byName["build"]]
	var env []string
	var runs string
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env = append(env, kv.Key+"="+kv.Value)
			}
		case *instructions.RunCommand:
			runs += strings.Join(c.CmdLine, " ") + "\n"
		}
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("build stage ENV %v: want CGO_ENABLED=0 (static binaries for distroless/static)", env)
	}
	for _, s := range Services {
		if !strings.Contains(runs, " "+s.Name+" ") && !strings.Contains(runs, " "+s.Name+";") {
			t.Errorf("the build stage does not build %s", s.Name)
		}
	}
	if !strings.Contains(runs, "./services/$bin") || !strings.Contains(runs, "./cmd/jqctl") {
		t.Errorf("the build stage's go build does not name ./services/$bin and ./cmd/jqctl:\n%s", runs)
	}

	// Each binary's stage: the binary from the build stage, its entrypoint,
	// and (services) a HEALTHCHECK that runs `<binary> healthcheck`.
	for _, b := range binaries() {
		i, ok := byName[b]
		if !ok {
			continue
		}
		bin := "/usr/local/bin/" + b
		var copied, entry, health bool
		for _, c := range stages[i].Commands {
			switch c := c.(type) {
			case *instructions.CopyCommand:
				copied = copied || (c.From == "build" && c.DestPath == bin)
			case *instructions.EntrypointCommand:
				entry = slices.Equal(c.CmdLine, []string{bin})
			case *instructions.HealthCheckCommand:
				health = slices.Equal(c.Health.Test, []string{"CMD", bin, "healthcheck"})
			}
		}
		if !copied || !entry {
			t.Errorf("stage %s: copies %s from build: %v; ENTRYPOINT [%q]: %v", b, bin, copied, bin, entry)
		}
		if _, isService := ServiceByName(b); isService && !health {
			t.Errorf("stage %s has no HEALTHCHECK CMD [%q, \"healthcheck\"]", b, bin)
		}
	}
}

// TestDockerBuildContext: the build stage copies the go.mod of every module
// of go.work (the workspace does not load otherwise), and .dockerignore
// keeps every source file the binaries are built from in the context.
func TestDockerBuildContext(t *testing.T) {
	root := repoRoot(t)
	stages := parseDockerfile(t)
	var copied []string
	for _, s := range stages {
		for _, c := range s.Commands {
			if c, ok := c.(*instructions.CopyCommand); ok && c.From == "" {
				copied = append(copied, c.SourcePaths...)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range work.Use {
		mod := filepath.ToSlash(filepath.Join(filepath.Clean(u.Path), "go.mod"))
		if !slices.Contains(copied, mod) {
			t.Errorf("go.work uses %s but the Dockerfile does not COPY %s", u.Path, mod)
		}
	}

	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	inContext := func(rel string) bool {
		ignored, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			t.Fatal(err)
		}
		return !ignored
	}
	for _, src := range copied {
		if _, err := os.Stat(filepath.Join(root, src)); err != nil {
			t.Errorf("COPY %s: %v", src, err)
		} else if !inContext(strings.TrimSuffix(src, "/")) {
			t.Errorf("COPY %s: .dockerignore leaves it out of the context", src)
		}
	}

	// Every file of the workspace's packages the binaries link, go.mod and
	// embedded files included.
	args := []string{"list", "-deps", "-json=Dir,Module,GoFiles,EmbedFiles", "./cmd/jqctl"}
	for _, s := range Services {
		args = append(args, "./services/"+s.Name)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var pkg struct {
			Dir                 string
			Module              *struct{ Path, Dir string }
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		if pkg.Module == nil || !strings.HasPrefix(pkg.Module.Path, "github.com/jetqueue/jetqueue/") {
			continue
		}
		files := []string{filepath.Join(pkg.Module.Dir, "go.mod"), filepath.Join(pkg.Module.Dir, "go.sum")}
		for _, f := range append(pkg.GoFiles, pkg.EmbedFiles...) {
			files = append(files, filepath.Join(pkg.Dir, f))
		}
		for _, f := range files {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			if !inContext(rel) {
				t.Errorf(".dockerignore leaves %s out of the build context", rel)
			}
			if !slices.ContainsFunc(copied, func(src string) bool {
				src = strings.TrimSuffix(src, "/")
				return rel == src || strings.HasPrefix(rel, src+"/")
			}) {
				t.Errorf("no COPY brings %s into the build stage", rel)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("go list found no package of this repository")
	}
}
