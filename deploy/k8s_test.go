package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// strict decodes as the API server's strict field validation does:
// unknown and duplicate fields are errors.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// rendered is a kustomization's output, decoded into client-go's types.
type rendered struct {
	objects      []runtime.Object
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	accounts     map[string]*corev1.ServiceAccount
	pdbs         map[string]*policyv1.PodDisruptionBudget
	roles        map[string]*rbacv1.ClusterRole
	bindings     map[string]*rbacv1.ClusterRoleBinding
	namespaces   map[string]*corev1.Namespace
	// custom are objects of kinds outside client-go's scheme (the
	// Prometheus Operator's), as YAML by kind/name.
	custom map[string][]byte
}

// render builds deploy/k8s/<dir> with kustomize (as kubectl apply -k
// does) and decodes every object strictly.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), "deploy", "k8s", dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		accounts: map[string]*corev1.ServiceAccount{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		roles: map[string]*rbacv1.ClusterRole{}, bindings: map[string]*rbacv1.ClusterRoleBinding{},
		namespaces: map[string]*corev1.Namespace{}, custom: map[string][]byte{}}
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(res.GetApiVersion(), "monitoring.coreos.com/") {
			r.custom[res.GetKind()+"/"+res.GetName()] = y
			continue
		}
		obj, gvk, err := strict.Decode(y, nil, nil)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", dir, res.GetKind(), res.GetName(), err)
		}
		r.objects = append(r.objects, obj)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *appsv1.StatefulSet:
			r.statefulSets[o.Name] = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *corev1.ServiceAccount:
			r.accounts[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs[o.Name] = o
		case *rbacv1.ClusterRole:
			r.roles[o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			r.bindings[o.Name] = o
		case *corev1.Namespace:
			r.namespaces[o.Name] = o
		default:
			t.Errorf("%s: unexpected %s %s", dir, gvk.Kind, res.GetName())
		}
	}
	return r
}

// env is a container's environment as the kubelet assembles it: envFrom
// ConfigMaps in order, then env. Values from a Secret or the downward API
// are marked.
func (r *rendered) env(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Errorf("container %s: envFrom other than a ConfigMap", c.Name)
			continue
		}
		cm, ok := r.configMaps[from.ConfigMapRef.Name]
		if !ok {
			t.Errorf("container %s: envFrom ConfigMap %s does not exist", c.Name, from.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			out[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom.FieldRef != nil:
			out[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		default:
			out[e.Name] = "?"
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestStrictDecoderRefusesUnknownFields(t *testing.T) {
	_, _, err := strict.Decode([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

func TestKubernetesBase(t *testing.T) {
	r := render(t, "base")
	checkServices(t, r, 1)
	checkNATS(t, r, 1)
}

func TestKubernetesNATSClusterOverlay(t *testing.T) {
	r := render(t, "overlays/nats-cluster")
	checkServices(t, r, 3)
	checkNATS(t, r, 3)
	pdb, ok := r.pdbs["nats"]
	if !ok {
		t.Fatal("no PodDisruptionBudget for the NATS cluster")
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("NATS PDB maxUnavailable %v, want 1 (a quorum of 3 survives one drain)", pdb.Spec.MaxUnavailable)
	}
	if !selects(t, pdb.Spec.Selector, r.statefulSets["nats"].Spec.Template.Labels) {
		t.Errorf("NATS PDB does not select the NATS pods")
	}
}

// checkServices holds the five Deployments to the invariants every
// rendering shares.
func checkServices(t *testing.T, r *rendered, streamReplicas int) {
	t.Helper()
	if got, want := keys(r.deployments), keys(map[string]bool{"ingest": true, "admission": true, "preemptor": true, "podsready": true, "scorer": true}); !slices.Equal(got, want) {
		t.Errorf("Deployments %v, want %v", got, want)
	}
	targets := dockerfileTargets(t)
	for name, d := range r.deployments {
		t.Run(name, func(t *testing.T) {
			svc, ok := ServiceByName(name)
			if !ok {
				t.Fatalf("Deployment %s is no service binary", name)
			}
			ps := d.Spec.Template.Spec
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(ps.Containers))
			}
			c := ps.Containers[0]

			// The image is the binary's Dockerfile target.
			image, _, _ := strings.Cut(c.Image, ":")
			if image != "jetqueue/"+name || !targets[name] {
				t.Errorf("image %q, want jetqueue/%s built from the Dockerfile's %s target", c.Image, name, name)
			}

			// Configuration: every variable is a flag of this binary.
			env := r.env(t, c)
			checkEnv(t, "Deployment "+name, name, keys(env))
			if got := env["JQ_STREAM_REPLICAS"]; got != strconv.Itoa(streamReplicas) {
				t.Errorf("JQ_STREAM_REPLICAS %q, want %d", got, streamReplicas)
			}
			if got := env["JQ_NATS_URL"]; !strings.HasPrefix(got, "nats://nats:") {
				t.Errorf("JQ_NATS_URL %q is not the nats Service", got)
			} else if _, ok := r.services["nats"]; !ok {
				t.Errorf("JQ_NATS_URL names Service nats, which does not exist")
			}
			if _, has := svc.Env()["JQ_INSTANCE"]; has && env["JQ_INSTANCE"] != "field:metadata.name" {
				t.Errorf("JQ_INSTANCE %q, want the pod's name (the lease holder's identity)", env["JQ_INSTANCE"])
			}

			// The admin port: probes, and the address the binary listens on.
			adminPort := parsePort(t, addrPort(t, env["JQ_ADMIN_ADDR"]))
			if host, _, _ := strings.Cut(env["JQ_ADMIN_ADDR"], ":"); host != "" {
				t.Errorf("JQ_ADMIN_ADDR %q listens on one host only; the kubelet probes the pod IP", env["JQ_ADMIN_ADDR"])
			}
			if p := containerPort(c, "admin"); p != int32(adminPort) {
				t.Errorf("container port admin %d, JQ_ADMIN_ADDR port %d", p, adminPort)
			}
			checkProbe(t, "readinessProbe", c, c.ReadinessProbe, "/readyz", adminPort)
			checkProbe(t, "livenessProbe", c, c.LivenessProbe, "/healthz", adminPort)

			// Resources and a locked-down security context.
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %v: want cpu and memory requests and a memory limit", c.Resources)
			}
			if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
				t.Errorf("pod securityContext does not set runAsNonRoot")
			}
			if ps.SecurityContext != nil && (ps.SecurityContext.RunAsUser == nil || *ps.SecurityContext.RunAsUser == 0) {
				t.Errorf("pod runs as uid 0 or an unset uid")
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, all capabilities dropped", sc)
			}

			// Its own ServiceAccount; only the client-go users get a token.
			if ps.ServiceAccountName != name {
				t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, name)
			} else if _, ok := r.accounts[name]; !ok {
				t.Errorf("ServiceAccount %s does not exist", name)
			}
			wantToken := name == "ingest" || name == "scorer"
			if got := ps.AutomountServiceAccountToken != nil && *ps.AutomountServiceAccountToken; got != wantToken {
				t.Errorf("automountServiceAccountToken %v, want %v (only ingest and scorer talk to the Kubernetes API)", got, wantToken)
			}

			// Lease holders: a hot standby and a budget that keeps one.
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			var budgets []string
			for pname, pdb := range r.pdbs {
				if pdb.Namespace == d.Namespace && selects(t, pdb.Spec.Selector, d.Spec.Template.Labels) {
					budgets = append(budgets, pname)
					if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.Type != intstr.Int ||
						int32(pdb.Spec.MinAvailable.IntValue()) < 1 || int32(pdb.Spec.MinAvailable.IntValue()) >= replicas {
						t.Errorf("PDB %s minAvailable %v: want at least 1 and fewer than the %d replicas", pname, pdb.Spec.MinAvailable, replicas)
					}
				}
			}
			if svc.LeaseHolder {
				if replicas < 2 {
					t.Errorf("lease holder with %d replicas: want a hot standby (2)", replicas)
				}
				if len(budgets) != 1 {
					t.Errorf("lease holder covered by PDBs %v, want exactly one", budgets)
				}
			} else if len(budgets) != 0 {
				t.Errorf("not a lease holder, yet covered by PDBs %v", budgets)
			}
		})
	}
	checkIngest(t, r)
	checkRBAC(t, r)
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func checkProbe(t *testing.T, what string, c corev1.Container, p *corev1.Probe, path string, port uint32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: want an HTTP GET of %s on the admin port", what, path)
		return
	}
	got := p.HTTPGet.Port.IntValue()
	if p.HTTPGet.Port.Type == intstr.String {
		got = int(containerPort(c, p.HTTPGet.Port.StrVal))
	}
	if p.HTTPGet.Path != path || got != int(port) {
		t.Errorf("%s: GET %s on port %v (%d), want %s on the admin port %d", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), got, path, port)
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// checkIngest: the API Service reaches ingest's HTTP port, and the
// PostgreSQL URL comes from the external Secret.
func checkIngest(t *testing.T, r *rendered) {
	t.Helper()
	d := r.deployments["ingest"]
	if d == nil {
		return
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := r.env(t, c)
	if got := env["JQ_DATABASE_URL"]; got != "secret:jetqueue-postgres/DATABASE_URL" {
		t.Errorf("ingest JQ_DATABASE_URL from %q, want the Secret jetqueue-postgres key DATABASE_URL", got)
	}
	for _, o := range r.objects {
		if s, ok := o.(*corev1.Secret); ok {
			t.Errorf("Secret %s is rendered; PostgreSQL's Secret is external", s.Name)
		}
	}
	httpPort := int32(parsePort(t, addrPort(t, env["JQ_HTTP_ADDR"])))
	if containerPort(c, "http") != httpPort {
		t.Errorf("ingest container port http %d, JQ_HTTP_ADDR port %d", containerPort(c, "http"), httpPort)
	}
	svc, ok := r.services["ingest"]
	if !ok {
		t.Fatal("no Service ingest")
	}
	if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d.Spec.Template.Labels) {
		t.Errorf("Service ingest does not select the ingest pods")
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Port == 8080 && (p.TargetPort.IntValue() == int(httpPort) || containerPort(c, p.TargetPort.StrVal) == httpPort) {
			found = true
		}
	}
	if !found {
		t.Errorf("Service ingest has no port 8080 to the HTTP API: %+v", svc.Spec.Ports)
	}
}

// checkRBAC: the client-go users get exactly what they read and write, and
// nobody gets a wildcard.
func checkRBAC(t *testing.T, r *rendered) {
	t.Helper()
	want := map[string][]string{
		"scorer": {"/nodes get,list,watch", "/pods get,list,watch"},
		"ingest": {"/events create,patch", "batch/jobs get,list,watch,patch", "batch/jobs/status patch"},
	}
	got := map[string][]string{}
	for _, b := range r.bindings {
		role, ok := r.roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || !ok {
			t.Errorf("ClusterRoleBinding %s: role %s %s not rendered", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		for _, s := range b.Subjects {
			sa, ok := r.accounts[s.Name]
			if s.Kind != "ServiceAccount" || !ok || sa.Namespace != s.Namespace {
				t.Errorf("ClusterRoleBinding %s: subject %s %s/%s is not one of ours", b.Name, s.Kind, s.Namespace, s.Name)
				continue
			}
			for _, rule := range role.Rules {
				for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
					if slices.Contains(list, "*") {
						t.Errorf("ClusterRole %s grants a wildcard: %+v", role.Name, rule)
					}
				}
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						got[s.Name] = append(got[s.Name], fmt.Sprintf("%s/%s %s", g, res, strings.Join(rule.Verbs, ",")))
					}
				}
			}
		}
	}
	for sa := range got {
		sort.Strings(got[sa])
	}
	for _, sa := range keys(r.accounts) {
		if !slices.Equal(got[sa], want[sa]) {
			t.Errorf("ServiceAccount %s may %v, want %v", sa, got[sa], want[sa])
		}
	}
}

// checkNATS: a JetStream server per replica, clustered when there are
// several, named by the headless Service, and streams no more replicated
// than there are servers.
func checkNATS(t *testing.T, r *rendered, replicas int) {
	t.Helper()
	ss, ok := r.statefulSets["nats"]
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	if ss.Spec.Replicas == nil || int(*ss.Spec.Replicas) != replicas {
		t.Errorf("NATS replicas %d, want %d", ptrOr(ss.Spec.Replicas, 1), replicas)
	}
	headless, ok := r.services[ss.Spec.ServiceName]
	if !ok || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("StatefulSet nats's serviceName %q is not a headless Service", ss.Spec.ServiceName)
	}
	var cmName string
	for _, v := range ss.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm, ok := r.configMaps[cmName]
	if !ok {
		t.Fatalf("NATS config ConfigMap %q not rendered", cmName)
	}
	t.Setenv("SERVER_NAME", "nats-0")
	// As the server reads it: the ConfigMap's files side by side (nats.conf
	// includes jetqueue.conf), the users' passwords in the environment.
	dir := t.TempDir()
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range append(append(append([]string{}, natsconf.Services...), natsconf.NodesUser), natsconf.ShippedNamespaces...) {
		t.Setenv(natsconf.PasswordEnv(u), "test")
	}
	cfg, err := conf.ParseFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	js, ok := cfg["jetstream"].(map[string]any)
	if !ok || js["store_dir"] == nil {
		t.Errorf("nats.conf: no jetstream block with a store_dir: %v", cfg["jetstream"])
	}
	if cfg["http_port"] == nil {
		t.Errorf("nats.conf: no monitoring port (http_port): the probes need /healthz")
	}
	cluster, clustered := cfg["cluster"].(map[string]any)
	if replicas == 1 {
		if clustered {
			t.Errorf("a single server with a cluster block")
		}
		return
	}
	if !clustered {
		t.Fatalf("%d servers without a cluster block", replicas)
	}
	var routes []string
	for _, r := range cluster["routes"].([]any) {
		routes = append(routes, r.(string))
	}
	var want []string
	for i := range replicas {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s:%v", ss.Name, i, headless.Name, cluster["port"]))
	}
	if !slices.Equal(routes, want) {
		t.Errorf("cluster routes %v, want %v (one per StatefulSet pod)", routes, want)
	}
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
