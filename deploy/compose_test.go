package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads deploy/compose/compose.yaml as `docker compose` does
// (compose-go validates it against the Compose specification's schema).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "compose")
	ctx := context.Background()
	details, err := loader.LoadConfigFiles(ctx, []string{filepath.Join(dir, "compose.yaml")}, dir)
	if err != nil {
		t.Fatal(err)
	}
	details.Environment = types.Mapping{}
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("jetqueue", true) })
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

// infrastructure are the compose services that are not ours.
var infrastructure = map[string]bool{"nats": true, "postgres": true}

// oneShot: a service that runs to completion (restart on-failure) rather
// than serving.
func oneShot(s types.ServiceConfig) bool { return strings.HasPrefix(s.Restart, "on-failure") }

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)
	targets := dockerfileTargets(t)

	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	for _, want := range append(binaries()[1:], "nats", "postgres", "seed") {
		if !slices.Contains(names, want) {
			t.Errorf("compose has no service %q (has %v)", want, names)
		}
	}

	for name, s := range p.Services {
		t.Run(name, func(t *testing.T) {
			if s.Restart == "" || s.Restart == "no" {
				t.Errorf("restart policy %q: want unless-stopped, always or on-failure", s.Restart)
			}
			if !oneShot(s) {
				if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) == 0 {
					t.Errorf("no healthcheck")
				}
			}
			if !infrastructure[name] {
				if len(s.DependsOn) == 0 {
					t.Errorf("depends on nothing")
				}
				for dep, d := range s.DependsOn {
					if _, ok := p.Services[dep]; !ok {
						t.Errorf("depends on unknown service %q", dep)
					}
					if d.Condition != types.ServiceConditionHealthy {
						t.Errorf("depends on %s with condition %q, want %s", dep, d.Condition, types.ServiceConditionHealthy)
					}
				}
			}
			if infrastructure[name] {
				return
			}

			// Ours: built from the repository's Dockerfile, one target per binary.
			if s.Build == nil {
				t.Fatalf("no build section: the image must come from the repository's Dockerfile")
			}
			if filepath.Clean(s.Build.Context) != root {
				t.Errorf("build context %s, want the repository root %s", s.Build.Context, root)
			}
			if df := s.Build.Dockerfile; df != "Dockerfile" && df != filepath.Join(root, "Dockerfile") {
				t.Errorf("dockerfile %q, want the repository's Dockerfile", df)
			}
			binary := s.Build.Target
			if !targets[binary] {
				t.Errorf("build target %q is not a stage of the Dockerfile", binary)
			}
			if s.Image != "jetqueue/"+binary+":dev" {
				t.Errorf("image %q, want jetqueue/%s:dev (the tag of what it builds)", s.Image, binary)
			}
			var env []string
			for k := range s.Environment {
				env = append(env, k)
			}
			checkEnv(t, name, binary, env)

			if binary == "jqctl" {
				// A one-shot seed: its files come from the repository.
				for _, v := range s.Volumes {
					if _, err := os.Stat(v.Source); err != nil {
						t.Errorf("volume source: %v", err)
					}
				}
				if i := slices.Index([]string(s.Command), "-f"); i >= 0 && i+1 < len(s.Command) {
					if !mountedFile(s, s.Command[i+1]) {
						t.Errorf("command reads %s, which no volume provides", s.Command[i+1])
					}
				}
				return
			}
			if name != binary {
				t.Errorf("service %s builds target %s", name, binary)
			}
			want := []string{"CMD", "/usr/local/bin/" + binary, "healthcheck"}
			if s.HealthCheck == nil || !slices.Equal([]string(s.HealthCheck.Test), want) {
				t.Errorf("healthcheck %v, want %v", s.HealthCheck, want)
			}
			if port := addrPort(t, envValue(s, "JQ_ADMIN_ADDR")); port == "" {
				t.Errorf("JQ_ADMIN_ADDR has no port")
			}
			if !strings.HasPrefix(envValue(s, "JQ_NATS_URL"), "nats://nats:") {
				t.Errorf("JQ_NATS_URL %q does not point at the nats service", envValue(s, "JQ_NATS_URL"))
			}
			if _, ok := s.DependsOn["nats"]; !ok {
				t.Errorf("does not wait for nats")
			}
		})
	}
}

func envValue(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

func mountedFile(s types.ServiceConfig, path string) bool {
	for _, v := range s.Volumes {
		if rel, err := filepath.Rel(v.Target, path); err == nil && !strings.HasPrefix(rel, "..") {
			_, err := os.Stat(filepath.Join(v.Source, rel))
			return err == nil
		}
	}
	return false
}

func TestComposeInfrastructure(t *testing.T) {
	p := loadCompose(t)

	nats := p.Services["nats"]
	cmd := strings.Join(nats.Command, " ")
	if !strings.Contains(" "+cmd+" ", " -js ") && !strings.Contains(cmd, "--jetstream") {
		t.Errorf("nats runs without JetStream: %q", cmd)
	}
	if !strings.Contains(cmd, "-m 8222") && !strings.Contains(cmd, "--http_port 8222") {
		t.Errorf("nats has no monitoring port 8222: %q", cmd)
	}
	if hc := strings.Join(nats.HealthCheck.Test, " "); !strings.Contains(hc, ":8222/healthz") {
		t.Errorf("nats healthcheck %q does not ask the monitoring port's /healthz", hc)
	}

	pg := p.Services["postgres"]
	if hc := strings.Join(pg.HealthCheck.Test, " "); !strings.Contains(hc, "pg_isready") {
		t.Errorf("postgres healthcheck %q does not use pg_isready", hc)
	}

	ing := p.Services["ingest"]
	if d, ok := ing.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("ingest does not wait for a healthy postgres (it migrates on start)")
	}
	if !strings.Contains(envValue(ing, "JQ_DATABASE_URL"), "@postgres:5432/") {
		t.Errorf("ingest's JQ_DATABASE_URL %q does not point at the postgres service", envValue(ing, "JQ_DATABASE_URL"))
	}
	httpPort := addrPort(t, envValue(ing, "JQ_HTTP_ADDR"))
	published := false
	for _, pc := range ing.Ports {
		if pc.Published == "8080" && pc.HostIP == "127.0.0.1" && pc.Target == parsePort(t, httpPort) {
			published = true
		}
	}
	if !published {
		t.Errorf("ingest's HTTP API (port %s) is not published on 127.0.0.1:8080: %+v", httpPort, ing.Ports)
	}

	seed := p.Services["seed"]
	if !slices.Equal([]string(seed.Command[:2]), []string{"apply", "-f"}) || !strings.HasSuffix(seed.Command[2], "/demo.yaml") {
		t.Errorf("seed command %v, want apply -f .../demo.yaml", seed.Command)
	}
	if d, ok := seed.DependsOn["ingest"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("seed does not wait for a healthy ingest")
	}
	if !strings.HasPrefix(envValue(seed, "JQ_SERVER"), "http://ingest:"+httpPort) {
		t.Errorf("seed's JQ_SERVER %q is not ingest's HTTP API", envValue(seed, "JQ_SERVER"))
	}
}
