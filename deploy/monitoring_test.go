package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the overlay uses; decoding is strict, so a
// misspelt field fails.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector        metav1.LabelSelector `json:"selector"`
		PodTargetLabels []string             `json:"podTargetLabels"`
		Endpoints       []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			Authorization *struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestKubernetesMonitoringOverlay: the ServiceMonitor reaches the admin
// port of every service's pods (and nothing else), and the Grafana
// dashboard it ships queries only metrics docs/metrics.md lists.
func TestKubernetesMonitoringOverlay(t *testing.T) {
	r := render(t, "overlays/monitoring")
	checkServices(t, r, 1)
	checkNATS(t, r, 1)

	y, ok := r.custom["ServiceMonitor/jetqueue"]
	if !ok {
		t.Fatal("no ServiceMonitor jetqueue")
	}
	var sm serviceMonitor
	if err := yaml.UnmarshalStrict(y, &sm); err != nil {
		t.Fatalf("ServiceMonitor: %v", err)
	}
	svc, ok := r.services["jetqueue-metrics"]
	if !ok {
		t.Fatal("no Service jetqueue-metrics")
	}
	if svc.Namespace != "jetqueue" || sm.Metadata.Namespace != "jetqueue" {
		t.Errorf("namespaces: Service %q, ServiceMonitor %q, want jetqueue", svc.Namespace, sm.Metadata.Namespace)
	}
	if !selects(t, &sm.Spec.Selector, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select Service jetqueue-metrics (labels %v)", sm.Spec.Selector, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("ServiceMonitor endpoints %+v, want one on /metrics", sm.Spec.Endpoints)
	}
	var target string
	for _, p := range svc.Spec.Ports {
		if p.Name == sm.Spec.Endpoints[0].Port {
			target = p.TargetPort.StrVal
		}
	}
	if target == "" {
		t.Fatalf("ServiceMonitor port %q is no named port of Service jetqueue-metrics", sm.Spec.Endpoints[0].Port)
	}
	sel := &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}
	for name, d := range r.deployments {
		if !selects(t, sel, d.Spec.Template.Labels) {
			t.Errorf("Service jetqueue-metrics does not select the %s pods", name)
		}
		if containerPort(d.Spec.Template.Spec.Containers[0], target) == 0 {
			t.Errorf("%s has no container port %q", name, target)
		}
	}
	for name, st := range r.statefulSets {
		if selects(t, sel, st.Spec.Template.Labels) {
			t.Errorf("Service jetqueue-metrics selects the %s pods, which serve no /metrics on %q", name, target)
		}
	}
	if !slices.Contains(sm.Spec.PodTargetLabels, "app.kubernetes.io/name") {
		t.Errorf("podTargetLabels %v: want app.kubernetes.io/name, which names the service of each series", sm.Spec.PodTargetLabels)
	}

	cm, ok := r.configMaps["jetqueue-grafana-dashboards"]
	if !ok {
		t.Fatal("no ConfigMap jetqueue-grafana-dashboards")
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboards ConfigMap labels %v: want grafana_dashboard=1 for Grafana's sidecar", cm.Labels)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	d := json.NewDecoder(strings.NewReader(cm.Data["kueue-dashboard.json"]))
	if err := d.Decode(&dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	documented := documentedMetrics(t)
	used := regexp.MustCompile(`\b(?:kueue|jetqueue)_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range used.FindAllString(q.Expr, -1) {
				n++
				base := strings.TrimSuffix(m, "_bucket")
				if !documented[base] {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not list", p.Title, m)
				}
			}
		}
	}
	if n == 0 {
		t.Error("the dashboard queries no jetqueue or Kueue metric")
	}
}

// documentedMetrics are the metric names of docs/metrics.md's tables
// (the first column, in backquotes).
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	row := regexp.MustCompile("^\\| `((?:kueue|jetqueue)_[a-z_]+)` \\|")
	for _, line := range bytes.Split(data, []byte("\n")) {
		if m := row.FindSubmatch(line); m != nil {
			out[string(m[1])] = true
		}
	}
	return out
}
