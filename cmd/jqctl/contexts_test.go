package main

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recorder is an API server that records the credentials it was sent.
type recorder struct {
	mu    sync.Mutex
	auth  []string
	certs []string
}

func (r *recorder) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		cn := ""
		if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
			cn = req.TLS.PeerCertificates[0].Subject.CommonName
		}
		r.certs = append(r.certs, cn)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"WorkloadList","items":[]}`))
	})
}

func (r *recorder) last() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.auth) == 0 {
		return "<no request>", ""
	}
	return r.auth[len(r.auth)-1], r.certs[len(r.certs)-1]
}

func jq(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// TestContexts: the current context's server, CA and token reach the
// server; use-context switches; --server and --token override; the config
// is private to its owner.
func TestContexts(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "jqctl", "config")
	t.Setenv("JQCTL_CONFIG", config)
	t.Setenv("JQ_SERVER", "")
	rec := &recorder{}
	srv := httptest.NewTLSServer(rec.handler())
	t.Cleanup(srv.Close)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(rec.handler())
	t.Cleanup(plain.Close)
	for _, args := range [][]string{
		{"config", "set-cluster", "prod", "--server", srv.URL, "--certificate-authority", ca, "--embed-certs"},
		{"config", "set-credentials", "alice", "--token", "alice-token"},
		{"config", "set-context", "prod", "--cluster", "prod", "--user", "alice"},
		{"config", "set-cluster", "local", "--server", plain.URL},
		{"config", "set-credentials", "bob", "--token", "bob-token"},
		{"config", "set-context", "local", "--cluster", "local", "--user", "bob"},
		{"config", "use-context", "prod"},
	} {
		if code, out := jq(t, args...); code != 0 {
			t.Fatalf("jqctl %v: %d %s", args, code, out)
		}
	}
	if st, err := os.Stat(config); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file: %v, %v; want mode 0600", st.Mode(), err)
	}
	if code, out := jq(t, "get", "workloads"); code != 0 {
		t.Fatalf("get over the prod context: %d %s", code, out)
	}
	if got, _ := rec.last(); got != "Bearer alice-token" {
		t.Errorf("prod context sent Authorization %q", got)
	}
	if code, out := jq(t, "get", "workloads", "--token", "override"); code != 0 || func() bool { a, _ := rec.last(); return a != "Bearer override" }() {
		t.Errorf("--token did not override: %d %s", code, out)
	}
	if code, out := jq(t, "get", "workloads", "--context", "local"); code != 0 || func() bool { a, _ := rec.last(); return a != "Bearer bob-token" }() {
		a, _ := rec.last()
		t.Errorf("--context local: %d %s (sent %q)", code, out, a)
	}
	if code, out := jq(t, "config", "use-context", "local"); code != 0 || !strings.Contains(out, `"local"`) {
		t.Fatalf("use-context: %d %s", code, out)
	}
	if code, out := jq(t, "get", "workloads"); code != 0 || func() bool { a, _ := rec.last(); return a != "Bearer bob-token" }() {
		t.Errorf("after use-context local: %d %s", code, out)
	}
	// --server overrides the context's server, keeping its credentials.
	if code, out := jq(t, "get", "workloads", "--context", "prod", "--server", plain.URL); code != 0 || func() bool { a, _ := rec.last(); return a != "Bearer alice-token" }() {
		t.Errorf("--server override: %d %s", code, out)
	}
	code, out := jq(t, "config", "get-contexts")
	if code != 0 || !strings.Contains(out, "*         local") || !strings.Contains(out, srv.URL) {
		t.Errorf("get-contexts:\n%s", out)
	}
	if code, out := jq(t, "config", "use-context", "nope"); code == 0 || !strings.Contains(out, `context "nope" is not in`) {
		t.Errorf("use-context of an unknown context: %d %s", code, out)
	}
}

// TestNoConfigKeepsTheOldDefaults: without a config file jqctl talks to
// JQ_SERVER without credentials, as before contexts existed.
func TestNoConfigKeepsTheOldDefaults(t *testing.T) {
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "absent"))
	rec := &recorder{}
	srv := httptest.NewServer(rec.handler())
	t.Cleanup(srv.Close)
	t.Setenv("JQ_SERVER", srv.URL)
	if code, out := jq(t, "get", "workloads"); code != 0 {
		t.Fatalf("%d %s", code, out)
	}
	if got, _ := rec.last(); got != "" {
		t.Errorf("sent Authorization %q without a config", got)
	}
	t.Setenv("JQ_SERVER", "")
	if got := newClient(newRoot(&bytes.Buffer{}, &bytes.Buffer{})).server; got != "http://127.0.0.1:8080" {
		t.Errorf("default server %q", got)
	}
}
