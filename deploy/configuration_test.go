package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigurationDoc: docs/configuration.md is what the flags say
// (go test -run TestConfigurationDoc -update . rewrites it).
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "configuration.md")
	got := string(ConfigurationDoc())
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestConfigurationDoc -update . in deploy/)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("docs/configuration.md is stale; run go test -run TestConfigurationDoc -update . in deploy/ (-file +flags):\n%s", diff)
	}
}

// TestEveryServiceHasTheCommonFlags: each service's flag set carries
// libs/service's flags, so --admin-addr and the healthcheck work everywhere.
func TestEveryServiceHasTheCommonFlags(t *testing.T) {
	for _, s := range Services {
		fs := s.FlagSet()
		for _, name := range []string{"admin-addr", "log-level", "log-json", "stop-timeout"} {
			if fs.Lookup(name) == nil {
				t.Errorf("%s has no --%s", s.Name, name)
			}
		}
		if fs.Lookup("nats-url") == nil || fs.Lookup("stream-replicas") == nil {
			t.Errorf("%s has no --nats-url or --stream-replicas", s.Name)
		}
	}
}
