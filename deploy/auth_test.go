package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/auth/rbac"
)

// TestShippedPolicies: every policy file shipped parses as ingest parses
// it, and the k8s base carries deploy/auth/roles.yaml's ClusterRoles
// unchanged (kustomize cannot read files outside the base).
func TestShippedPolicies(t *testing.T) {
	for _, p := range []string{"auth/roles.yaml", "auth/policy.yaml", "k8s/base/authorization-policy.yaml"} {
		if _, err := rbac.Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	roles, err := os.ReadFile(filepath.Join("auth", "roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, docs, _ := strings.Cut(string(roles), "\n---\n")
	for _, p := range []string{"auth/policy.yaml", "k8s/base/authorization-policy.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), docs) {
			t.Errorf("%s does not carry auth/roles.yaml's ClusterRoles unchanged", p)
		}
	}
}
