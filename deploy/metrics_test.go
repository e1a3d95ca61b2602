package deploy

import (
	"net"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// metricsSecret is the Secret (and key) the Kubernetes manifests keep
// /metrics' bearer token in.
const metricsSecret, metricsSecretKey = "jetqueue-metrics", "token"

// loopback says whether a listen address reaches only its host (or
// pod): what libs/service serves /metrics on without a token.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// TestNoManifestServesMetricsToTheNetworkWithoutAToken: /metrics lists
// every namespace, queue and quota. Every shipped service binds its admin
// port on loopback, or requires a bearer token from a file that a Secret
// fills; none opts out with JQ_METRICS_ALLOW_UNAUTHENTICATED. The
// monitoring overlay's ServiceMonitor sends the same Secret's token.
func TestNoManifestServesMetricsToTheNetworkWithoutAToken(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if infrastructure[name] || oneShot(s) {
			continue
		}
		if v := envValue(s, "JQ_METRICS_ALLOW_UNAUTHENTICATED"); v != "" {
			t.Errorf("compose %s sets JQ_METRICS_ALLOW_UNAUTHENTICATED=%s", name, v)
		}
		if addr := envValue(s, "JQ_ADMIN_ADDR"); !loopback(addr) && envValue(s, "JQ_METRICS_TOKEN_FILE") == "" {
			t.Errorf("compose %s: JQ_ADMIN_ADDR %q is not loopback and /metrics has no JQ_METRICS_TOKEN_FILE", name, addr)
		}
	}
	for _, dir := range []string{"base", "overlays/monitoring", "overlays/nats-cluster"} {
		r := render(t, dir)
		for name, d := range r.deployments {
			ps := d.Spec.Template.Spec
			env := r.env(t, ps.Containers[0])
			if v, ok := env["JQ_METRICS_ALLOW_UNAUTHENTICATED"]; ok {
				t.Errorf("%s: %s sets JQ_METRICS_ALLOW_UNAUTHENTICATED=%s", dir, name, v)
			}
			if loopback(env["JQ_ADMIN_ADDR"]) {
				continue
			}
			file := env["JQ_METRICS_TOKEN_FILE"]
			if file == "" {
				t.Errorf("%s: %s binds its admin port on %q with no JQ_METRICS_TOKEN_FILE: /metrics is open to the network", dir, name, env["JQ_ADMIN_ADDR"])
				continue
			}
			// The file is the token key of the Secret, mounted.
			secret := ""
			for _, m := range ps.Containers[0].VolumeMounts {
				if filepath.Join(m.MountPath, metricsSecretKey) != file {
					continue
				}
				for _, v := range ps.Volumes {
					if v.Name == m.Name && v.Secret != nil {
						secret = v.Secret.SecretName
					}
				}
			}
			if secret != metricsSecret {
				t.Errorf("%s: %s: JQ_METRICS_TOKEN_FILE %s is not key %s of the Secret %s, mounted", dir, name, file, metricsSecretKey, metricsSecret)
			}
		}
		y, ok := r.custom["ServiceMonitor/jetqueue"]
		if !ok {
			continue
		}
		var sm serviceMonitor
		if err := yaml.UnmarshalStrict(y, &sm); err != nil {
			t.Fatalf("%s: ServiceMonitor: %v", dir, err)
		}
		for _, e := range sm.Spec.Endpoints {
			if a := e.Authorization; a == nil || a.Type != "Bearer" || a.Credentials.Name != metricsSecret || a.Credentials.Key != metricsSecretKey {
				t.Errorf("%s: ServiceMonitor endpoint %s sends no bearer token from Secret %s key %s: %+v", dir, e.Port, metricsSecret, metricsSecretKey, a)
			}
		}
	}
}
