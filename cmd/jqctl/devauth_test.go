package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// TestDevPolicyBindsEachNamespacesSubmitter: with a team policy that says
// nothing of durable submitters (the shipped roles, team-a's users bound
// in team-a), the policy dev gives ingest lets team-a's durable submitter
// create workloads and Jobs in team-a and nothing else; without a team
// policy dev gives none (everyone identified may do everything).
func TestDevPolicyBindsEachNamespacesSubmitter(t *testing.T) {
	dir := t.TempDir()
	if file, err := devPolicy(dir, ""); err != nil || file != "" {
		t.Fatalf("without a team policy: %q, %v; want none", file, err)
	}
	roles, err := os.ReadFile(filepath.Join("..", "..", "deploy", "auth", "roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	team := filepath.Join(dir, "team.yaml")
	if err := os.WriteFile(team, append(roles, `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a, namespace: team-a}
subjects: [{kind: Group, name: team-a}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
`...), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := devPolicy(dir, team)
	if err != nil {
		t.Fatal(err)
	}
	p, err := rbac.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	submitter := auth.User{Name: ingest.SubmitterName("team-a"), Groups: []string{ingest.GroupSubmitters, auth.GroupAuthenticated}}
	for _, tc := range []struct {
		a    rbac.Attributes
		want bool
	}{
		{rbac.Attributes{Verb: "create", APIGroup: "kueue.x-k8s.io", Resource: "workloads", Namespace: "team-a"}, true},
		{rbac.Attributes{Verb: "create", APIGroup: "batch", Resource: "jobs", Namespace: "team-a"}, true},
		{rbac.Attributes{Verb: "create", APIGroup: "kueue.x-k8s.io", Resource: "workloads", Namespace: "team-b"}, false},
		{rbac.Attributes{Verb: "create", APIGroup: "kueue.x-k8s.io", Resource: "workloads", Subresource: "priority", Namespace: "team-a"}, false},
		{rbac.Attributes{Verb: "get", APIGroup: "kueue.x-k8s.io", Resource: "workloads", Namespace: "team-a", Name: "w"}, false},
		{rbac.Attributes{Verb: "delete", APIGroup: "kueue.x-k8s.io", Resource: "workloads", Namespace: "team-a", Name: "w"}, false},
	} {
		if got := p.Allows(submitter, tc.a); got != tc.want {
			t.Errorf("team-a's submitter %+v: %v, want %v", tc.a, got, tc.want)
		}
	}
}
