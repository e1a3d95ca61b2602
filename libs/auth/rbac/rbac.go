// Package rbac decides what an identity may do, with Kubernetes RBAC
// objects: rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings
// and ClusterRoleBindings, read from one multi-document YAML file
// (--authorization-policy-file) and evaluated as the kube-apiserver's RBAC
// authorizer does:
//
//   - a ClusterRoleBinding grants its ClusterRole's rules everywhere;
//   - a RoleBinding grants its Role's (or ClusterRole's) resource rules in
//     its own namespace only;
//   - non-resource URLs are granted only by ClusterRoles bound with a
//     ClusterRoleBinding;
//   - system:masters may do everything.
//
// Whether one rule covers a request is decided by Kubernetes' own rule
// comparison (k8s.io/component-helpers/auth/rbac/validation.Covers), so
// "*", "resource/subresource", "*/subresource", resourceNames and
// "/path/*" mean exactly what they mean in Kubernetes.
package rbac

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/auth"
)

// Attributes describe one request: a resource request (Verb, APIGroup,
// Resource, Subresource, Namespace, Name) or a non-resource one (Verb and
// Path), as the kube-apiserver's authorizer.Attributes do.
type Attributes struct {
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	// Namespace is empty for cluster-scoped resources (and for a list
	// across all namespaces).
	Namespace string
	// Name is empty for create and list.
	Name string
	// Path is set for a non-resource request (Resource is then empty).
	Path string
}

// IsResource says whether a is a resource request.
func (a Attributes) IsResource() bool { return a.Path == "" }

// resource is "resource" or "resource/subresource".
func (a Attributes) resource() string {
	if a.Subresource != "" {
		return a.Resource + "/" + a.Subresource
	}
	return a.Resource
}

// Forbidden is the message of a 403, as Kubernetes words it.
func Forbidden(u auth.User, a Attributes) string {
	if !a.IsResource() {
		return fmt.Sprintf("user %q cannot %s path %q", u.Name, a.Verb, a.Path)
	}
	msg := fmt.Sprintf("user %q cannot %s resource %q in API group %q", u.Name, a.Verb, a.resource(), a.APIGroup)
	if a.Namespace != "" {
		return msg + fmt.Sprintf(" in the namespace %q", a.Namespace)
	}
	return msg + " at the cluster scope"
}

// Policy is a validated set of RBAC objects. The zero value allows
// nothing (but to system:masters).
type Policy struct {
	roles               map[string]*rbacv1.Role // "namespace/name"
	clusterRoles        map[string]*rbacv1.ClusterRole
	roleBindings        []*rbacv1.RoleBinding
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// Limits on a policy file: it is read at start, but is still input.
const (
	MaxPolicyBytes = 4 << 20
	MaxDocuments   = 10000
)

// Load reads and validates a policy file.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxPolicyBytes)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse decodes and validates multi-document YAML (or JSON) of RBAC
// objects. Every error names its document (1-based) and field; unknown
// kinds and fields, rules that cannot match, and bindings whose role is
// not in the policy are refused, so that a typo never grants or denies
// silently.
func Parse(data []byte) (*Policy, error) {
	p := &Policy{roles: map[string]*rbacv1.Role{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var errs []error
	type binding struct {
		doc     int
		ref     rbacv1.RoleRef
		ns      string
		cluster bool
	}
	var refs []binding
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if n > MaxDocuments {
			return nil, fmt.Errorf("more than %d documents", MaxDocuments)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			n--
			continue
		}
		fail := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("document %d: %s: %s", n, field, fmt.Sprintf(format, args...)))
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			fail("", "%v", err)
			continue
		}
		if head.APIVersion != rbacv1.SchemeGroupVersion.String() {
			fail("apiVersion", "want %s, got %q", rbacv1.SchemeGroupVersion, head.APIVersion)
			continue
		}
		var obj any
		switch head.Kind {
		case "Role":
			obj = &rbacv1.Role{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			fail("kind", "want Role, ClusterRole, RoleBinding or ClusterRoleBinding, got %q", head.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			fail("", "%s: %v", head.Kind, err)
			continue
		}
		switch o := obj.(type) {
		case *rbacv1.Role:
			what := fmt.Sprintf("Role %s/%s", o.Namespace, o.Name)
			if o.Name == "" || o.Namespace == "" {
				fail("metadata", "a Role needs a name and a namespace")
				continue
			}
			key := o.Namespace + "/" + o.Name
			if p.roles[key] != nil {
				fail("metadata.name", "%s appears twice", what)
			}
			for i, rule := range o.Rules {
				checkRule(fail, what, i, rule, false)
			}
			p.roles[key] = o
		case *rbacv1.ClusterRole:
			what := "ClusterRole " + o.Name
			if o.Name == "" {
				fail("metadata.name", "a ClusterRole needs a name")
				continue
			}
			if o.AggregationRule != nil {
				fail("aggregationRule", "%s: aggregated ClusterRoles are not supported; list the rules", what)
			}
			if p.clusterRoles[o.Name] != nil {
				fail("metadata.name", "%s appears twice", what)
			}
			for i, rule := range o.Rules {
				checkRule(fail, what, i, rule, true)
			}
			p.clusterRoles[o.Name] = o
		case *rbacv1.RoleBinding:
			what := fmt.Sprintf("RoleBinding %s/%s", o.Namespace, o.Name)
			if o.Name == "" || o.Namespace == "" {
				fail("metadata", "a RoleBinding needs a name and a namespace")
				continue
			}
			if !checkRef(fail, what, o.RoleRef, "Role", "ClusterRole") || !checkSubjects(fail, what, o.Subjects, o.Namespace) {
				continue
			}
			refs = append(refs, binding{doc: n, ref: o.RoleRef, ns: o.Namespace})
			p.roleBindings = append(p.roleBindings, o)
		case *rbacv1.ClusterRoleBinding:
			what := "ClusterRoleBinding " + o.Name
			if o.Name == "" {
				fail("metadata.name", "a ClusterRoleBinding needs a name")
				continue
			}
			if !checkRef(fail, what, o.RoleRef, "ClusterRole") || !checkSubjects(fail, what, o.Subjects, "") {
				continue
			}
			refs = append(refs, binding{doc: n, ref: o.RoleRef, cluster: true})
			p.clusterRoleBindings = append(p.clusterRoleBindings, o)
		}
	}
	// Roles may follow their bindings in the file: resolve at the end.
	for _, b := range refs {
		found := false
		switch b.ref.Kind {
		case "Role":
			found = p.roles[b.ns+"/"+b.ref.Name] != nil
		case "ClusterRole":
			found = p.clusterRoles[b.ref.Name] != nil
		}
		if !found {
			where := ""
			if b.ref.Kind == "Role" {
				where = " in namespace " + b.ns
			}
			errs = append(errs, fmt.Errorf("document %d: roleRef.name: %s %q is not in the policy%s", b.doc, b.ref.Kind, b.ref.Name, where))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// stripComments drops comment lines, so a document of comments only
// counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

type failer func(field, format string, args ...any)

// checkRule refuses what the kube-apiserver's validation refuses: a rule
// without verbs, resources without API groups, non-resource URLs mixed
// with resources or in a namespaced Role.
func checkRule(fail failer, what string, i int, r rbacv1.PolicyRule, cluster bool) {
	field := fmt.Sprintf("rules[%d]", i)
	if len(r.Verbs) == 0 {
		fail(field+".verbs", "%s: a rule needs verbs", what)
	}
	if len(r.NonResourceURLs) > 0 {
		if !cluster {
			fail(field+".nonResourceURLs", "%s: only ClusterRoles may grant non-resource URLs", what)
		}
		if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
			fail(field, "%s: a rule names either resources or non-resource URLs, not both", what)
		}
		for j, u := range r.NonResourceURLs {
			if u != "*" && !strings.HasPrefix(u, "/") {
				fail(fmt.Sprintf("%s.nonResourceURLs[%d]", field, j), "%s: %q must start with / (or be *)", what, u)
			}
			if k := strings.Index(u, "*"); k >= 0 && k != len(u)-1 {
				fail(fmt.Sprintf("%s.nonResourceURLs[%d]", field, j), "%s: %q: * may only end a path", what, u)
			}
		}
		return
	}
	if len(r.Resources) == 0 {
		fail(field+".resources", "%s: a rule needs resources or nonResourceURLs", what)
	}
	if len(r.APIGroups) == 0 {
		fail(field+".apiGroups", "%s: a rule with resources needs apiGroups", what)
	}
}

func checkRef(fail failer, what string, ref rbacv1.RoleRef, kinds ...string) bool {
	if ref.APIGroup != rbacv1.GroupName {
		fail("roleRef.apiGroup", "%s: want %s, got %q", what, rbacv1.GroupName, ref.APIGroup)
		return false
	}
	if !slices.Contains(kinds, ref.Kind) {
		fail("roleRef.kind", "%s: want %s, got %q", what, strings.Join(kinds, " or "), ref.Kind)
		return false
	}
	if ref.Name == "" {
		fail("roleRef.name", "%s: empty", what)
		return false
	}
	return true
}

// checkSubjects refuses subjects that could never match. A ServiceAccount
// subject matches the user system:serviceaccount:<namespace>:<name>, as in
// Kubernetes; in a RoleBinding its namespace defaults to the binding's.
func checkSubjects(fail failer, what string, subjects []rbacv1.Subject, ns string) bool {
	ok := true
	for i, s := range subjects {
		field := fmt.Sprintf("subjects[%d]", i)
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != "" && s.APIGroup != rbacv1.GroupName {
				fail(field+".apiGroup", "%s: want %s, got %q", what, rbacv1.GroupName, s.APIGroup)
				ok = false
			}
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" {
				fail(field+".apiGroup", "%s: a ServiceAccount has no apiGroup", what)
				ok = false
			}
			if s.Namespace == "" && ns == "" {
				fail(field+".namespace", "%s: a ServiceAccount subject needs a namespace", what)
				ok = false
			}
		default:
			fail(field+".kind", "%s: want User, Group or ServiceAccount, got %q", what, s.Kind)
			ok = false
		}
		if s.Name == "" {
			fail(field+".name", "%s: empty", what)
			ok = false
		}
	}
	return ok
}

// matches says whether subject s names u (bindingNS: the namespace of the
// RoleBinding, "" for a ClusterRoleBinding).
func matches(s rbacv1.Subject, u auth.User, bindingNS string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name == u.Name
	case rbacv1.GroupKind:
		return u.InGroup(s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS
		}
		return u.Name == "system:serviceaccount:"+ns+":"+s.Name
	}
	return false
}

// Allows says whether u may do a.
func (p *Policy) Allows(u auth.User, a Attributes) bool {
	if u.InGroup(auth.GroupMasters) {
		return true
	}
	want := []rbacv1.PolicyRule{request(a)}
	for _, b := range p.clusterRoleBindings {
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return matches(s, u, "") }) {
			if covered, _ := validation.Covers(p.clusterRoles[b.RoleRef.Name].Rules, want); covered {
				return true
			}
		}
	}
	if !a.IsResource() || a.Namespace == "" {
		return false
	}
	for _, b := range p.roleBindings {
		if b.Namespace != a.Namespace || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return matches(s, u, b.Namespace) }) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if b.RoleRef.Kind == "Role" {
			rules = p.roles[b.Namespace+"/"+b.RoleRef.Name].Rules
		} else {
			rules = p.clusterRoles[b.RoleRef.Name].Rules
		}
		if covered, _ := validation.Covers(resourceRules(rules), want); covered {
			return true
		}
	}
	return false
}

// Namespaces answers "where may u do a?" for a request across namespaces
// (a list without a namespace): everywhere (all), or in these namespaces
// only, sorted. a.Namespace is ignored.
func (p *Policy) Namespaces(u auth.User, a Attributes) (all bool, namespaces []string) {
	a.Namespace = ""
	if p.Allows(u, a) {
		return true, nil
	}
	for _, b := range p.roleBindings {
		if slices.Contains(namespaces, b.Namespace) {
			continue
		}
		a.Namespace = b.Namespace
		if p.Allows(u, a) {
			namespaces = append(namespaces, b.Namespace)
		}
	}
	slices.Sort(namespaces)
	return false, namespaces
}

// request is a as the one rule it needs.
func request(a Attributes) rbacv1.PolicyRule {
	if !a.IsResource() {
		return rbacv1.PolicyRule{Verbs: []string{a.Verb}, NonResourceURLs: []string{a.Path}}
	}
	r := rbacv1.PolicyRule{Verbs: []string{a.Verb}, APIGroups: []string{a.APIGroup}, Resources: []string{a.resource()}}
	if a.Name != "" {
		r.ResourceNames = []string{a.Name}
	}
	return r
}

// resourceRules drops non-resource rules: a RoleBinding grants none.
func resourceRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	return slices.DeleteFunc(slices.Clone(rules), func(r rbacv1.PolicyRule) bool { return len(r.NonResourceURLs) > 0 })
}
