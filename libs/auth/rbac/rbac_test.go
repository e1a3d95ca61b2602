package rbac

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/auth"
)

const kueue = "kueue.x-k8s.io"

func user(name string, groups ...string) auth.User { return auth.User{Name: name, Groups: groups} }

// shipped is deploy/auth/policy.yaml: the shipped ClusterRoles and the
// example bindings.
func shipped(t *testing.T) *Policy {
	t.Helper()
	p, err := Load(filepath.Join("..", "..", "..", "deploy", "auth", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShippedRoles(t *testing.T) {
	p := shipped(t)
	alice := user("alice", "team-a", auth.GroupAuthenticated)
	olga := user("olga", "ops", auth.GroupAuthenticated)
	vera := user("vera", "auditors", auth.GroupAuthenticated)
	wl := func(verb, sub, ns string) Attributes {
		return Attributes{Verb: verb, APIGroup: kueue, Resource: "workloads", Subresource: sub, Namespace: ns, Name: "w"}
	}
	for _, tc := range []struct {
		name string
		u    auth.User
		a    Attributes
		want bool
	}{
		{"user submits in own namespace", alice, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Namespace: "team-a"}, true},
		{"user submits a Job in own namespace", alice, Attributes{Verb: "create", APIGroup: "batch", Resource: "jobs", Namespace: "team-a"}, true},
		{"user finishes in own namespace", alice, wl("create", "finish", "team-a"), true},
		{"user podsready in own namespace", alice, wl("create", "podsready", "team-a"), true},
		{"user deletes in own namespace", alice, wl("delete", "", "team-a"), true},
		{"user may not reprioritise", alice, wl("create", "priority", "team-a"), false},
		{"user submits elsewhere", alice, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Namespace: "team-b"}, false},
		{"user finishes elsewhere", alice, wl("create", "finish", "team-b"), false},
		{"user lists cluster-wide", alice, Attributes{Verb: "list", APIGroup: kueue, Resource: "workloads"}, false},
		{"user applies a ClusterQueue", alice, Attributes{Verb: "create", APIGroup: kueue, Resource: "clusterqueues", Name: "cq"}, false},
		{"user creates a LocalQueue", alice, Attributes{Verb: "create", APIGroup: kueue, Resource: "localqueues", Namespace: "team-a"}, false},
		{"user reads own LocalQueue's pending", alice, Attributes{Verb: "get", APIGroup: "visibility.kueue.x-k8s.io", Resource: "localqueues", Subresource: "pendingworkloads", Namespace: "team-a", Name: "lq"}, true},
		{"user rebuilds", alice, Attributes{Verb: "post", Path: "/v1/projection/rebuild"}, false},
		{"viewer reads anywhere", vera, wl("get", "", "team-b"), true},
		{"viewer lists cluster-wide", vera, Attributes{Verb: "list", APIGroup: kueue, Resource: "workloads"}, true},
		{"viewer cannot create", vera, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Namespace: "team-a"}, false},
		{"viewer cannot finish", vera, wl("create", "finish", "team-a"), false},
		{"admin applies a ClusterQueue", olga, Attributes{Verb: "update", APIGroup: kueue, Resource: "clusterqueues", Name: "cq"}, true},
		{"admin reprioritises", olga, wl("create", "priority", "team-b"), true},
		{"admin rebuilds", olga, Attributes{Verb: "post", Path: "/v1/projection/rebuild"}, true},
		{"admin advances the clock", olga, Attributes{Verb: "post", Path: "/v1/debug/clock/advance"}, true},
		{"admin cannot delete the projection by GET", olga, Attributes{Verb: "delete", Path: "/v1/projection/rebuild"}, false},
		{"masters do anything", user("root", auth.GroupMasters), Attributes{Verb: "post", Path: "/anything"}, true},
		{"nobody", user("nobody", auth.GroupAuthenticated), wl("get", "", "team-a"), false},
	} {
		if got := p.Allows(tc.u, tc.a); got != tc.want {
			t.Errorf("%s: Allows(%s, %+v) = %v, want %v", tc.name, tc.u.Name, tc.a, got, tc.want)
		}
	}
}

func TestBatchAdminWithoutJetqueueAdminCannotRebuild(t *testing.T) {
	p, err := Parse([]byte(readRoles(t) + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
subjects: [{kind: User, name: bob}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Allows(user("bob"), Attributes{Verb: "post", Path: "/v1/projection/rebuild"}) {
		t.Error("batch-admin alone may rebuild the projection")
	}
	if !p.Allows(user("bob"), Attributes{Verb: "create", APIGroup: kueue, Resource: "clusterqueues"}) {
		t.Error("batch-admin may not create ClusterQueues")
	}
}

func readRoles(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRuleSemantics pins Kubernetes' matching: wildcards, subresources,
// resourceNames, non-resource prefixes, RoleBindings limited to their
// namespace and to resource rules, ServiceAccount subjects.
func TestRuleSemantics(t *testing.T) {
	p, err := Parse([]byte(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: star}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: [get]}
- {nonResourceURLs: ["/v1/debug/*"], verbs: [post]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: finisher}
rules:
- {apiGroups: [kueue.x-k8s.io], resources: ["*/finish"], verbs: [create]}
- {apiGroups: [kueue.x-k8s.io], resources: [workloads], resourceNames: [only], verbs: [delete]}
- {nonResourceURLs: ["/v1/projection/rebuild"], verbs: [post]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: ns1}
rules:
- {apiGroups: [kueue.x-k8s.io], resources: [workloads], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: star}
subjects: [{kind: Group, name: readers, apiGroup: rbac.authorization.k8s.io}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: star}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fin, namespace: ns1}
subjects: [{kind: User, name: fin}, {kind: ServiceAccount, name: robot}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: finisher}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: r, namespace: ns1}
subjects: [{kind: User, name: fin}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: r, namespace: ns2}
subjects: [{kind: User, name: fin}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: finisher}
`))
	if err != nil {
		t.Fatal(err)
	}
	reader, fin, robot := user("r", "readers"), user("fin"), user("system:serviceaccount:ns1:robot")
	for _, tc := range []struct {
		u    auth.User
		a    Attributes
		want bool
	}{
		{reader, Attributes{Verb: "get", APIGroup: "batch", Resource: "jobs", Namespace: "x", Name: "j"}, true},
		{reader, Attributes{Verb: "get", APIGroup: kueue, Resource: "workloads", Subresource: "explain", Namespace: "x"}, true},
		{reader, Attributes{Verb: "list", APIGroup: kueue, Resource: "workloads"}, false},
		{reader, Attributes{Verb: "post", Path: "/v1/debug/clock/advance"}, true},
		{reader, Attributes{Verb: "post", Path: "/v1/debugger"}, false},
		{reader, Attributes{Verb: "post", Path: "/v1/debug"}, false},
		{fin, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish", Namespace: "ns1", Name: "w"}, true},
		{fin, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "podsready", Namespace: "ns1", Name: "w"}, false},
		{fin, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Namespace: "ns1"}, false},
		{fin, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish", Namespace: "ns3", Name: "w"}, false},
		{fin, Attributes{Verb: "delete", APIGroup: kueue, Resource: "workloads", Namespace: "ns1", Name: "only"}, true},
		{fin, Attributes{Verb: "delete", APIGroup: kueue, Resource: "workloads", Namespace: "ns1", Name: "other"}, false},
		{fin, Attributes{Verb: "list", APIGroup: kueue, Resource: "workloads", Namespace: "ns1"}, true},
		// A RoleBinding never grants non-resource URLs.
		{fin, Attributes{Verb: "post", Path: "/v1/projection/rebuild"}, false},
		{robot, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish", Namespace: "ns1", Name: "w"}, true},
		{user("system:serviceaccount:ns2:robot"), Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish", Namespace: "ns1", Name: "w"}, false},
	} {
		if got := p.Allows(tc.u, tc.a); got != tc.want {
			t.Errorf("Allows(%s, %+v) = %v, want %v", tc.u.Name, tc.a, got, tc.want)
		}
	}
	all, nss := p.Namespaces(fin, Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish"})
	if all || !cmp.Equal(nss, []string{"ns1", "ns2"}) {
		t.Errorf("Namespaces = %v %v, want ns1 ns2", all, nss)
	}
	if all, _ := p.Namespaces(reader, Attributes{Verb: "get", APIGroup: kueue, Resource: "workloads"}); !all {
		t.Error("a ClusterRoleBinding grants every namespace")
	}
}

func TestForbiddenMessage(t *testing.T) {
	for _, tc := range []struct {
		a    Attributes
		want string
	}{
		{Attributes{Verb: "create", APIGroup: kueue, Resource: "workloads", Subresource: "finish", Namespace: "team-b", Name: "w"},
			`user "bob" cannot create resource "workloads/finish" in API group "kueue.x-k8s.io" in the namespace "team-b"`},
		{Attributes{Verb: "list", APIGroup: kueue, Resource: "clusterqueues"},
			`user "bob" cannot list resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope`},
		{Attributes{Verb: "post", Path: "/v1/projection/rebuild"}, `user "bob" cannot post path "/v1/projection/rebuild"`},
	} {
		if got := Forbidden(user("bob"), tc.a); got != tc.want {
			t.Errorf("got %s\nwant %s", got, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	const role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: [{apiGroups: [a], resources: [b], verbs: [get]}]\n---\n"
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}", "document 1: apiVersion"},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: Policy\nmetadata: {name: x}", `document 1: kind: want Role, ClusterRole, RoleBinding or ClusterRoleBinding, got "Policy"`},
		{role + "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nsubjects: [{kind: User, name: u}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: missing}",
			`document 2: roleRef.name: ClusterRole "missing" is not in the policy`},
		{role + "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: b}\nsubjects: [{kind: User, name: u}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}",
			`document 2: roleRef.kind: ClusterRoleBinding b: want ClusterRole, got "Role"`},
		{role + "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b, namespace: ns}\nsubjects: [{kind: User, name: u}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}",
			`document 2: roleRef.name: Role "r" is not in the policy in namespace ns`},
		{role + "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b, namespace: ns}\nsubjects: [{kind: User, name: u}]\nroleRef: {apiGroup: example.com, kind: ClusterRole, name: r}",
			`document 2: roleRef.apiGroup`},
		{role + "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b, namespace: ns}\nsubjects: [{kind: Robot, name: u}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}",
			`document 2: subjects[0].kind`},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: [{apiGroups: [a], resources: [b], verbs: [get], verb: [list]}]", `document 1: : ClusterRole: error unmarshaling JSON: while decoding JSON: json: unknown field "verb"`},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: ns}\nrules: [{nonResourceURLs: [/x], verbs: [get]}]", "document 1: rules[0].nonResourceURLs: Role ns/r: only ClusterRoles"},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: [{resources: [b], verbs: [get]}]", "document 1: rules[0].apiGroups"},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\nrules: [{apiGroups: [a], resources: [b]}]", "document 1: rules[0].verbs"},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\naggregationRule: {clusterRoleSelectors: [{matchLabels: {a: b}}]}", "document 1: aggregationRule"},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

func TestLoadBoundsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("# "+strings.Repeat("x", MaxPolicyBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of an oversized file = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(readRolesF(f)))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err == nil {
			p.Allows(user("u", "g"), Attributes{Verb: "get", APIGroup: kueue, Resource: "workloads", Namespace: "n"})
			p.Namespaces(user("u", "g"), Attributes{Verb: "list", APIGroup: kueue, Resource: "workloads"})
		}
	})
}

func readRolesF(f *testing.F) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "roles.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}
