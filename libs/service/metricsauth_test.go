package service

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestMetricsOffLoopbackNeedAToken: an admin address other than loopback
// without --metrics-token-file stops the start, naming the flags, unless
// --metrics-allow-unauthenticated says so; loopback needs nothing.
func TestMetricsOffLoopbackNeedAToken(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		err := RunContext(context.Background(), "test", Options{AdminAddr: addr}, zap.NewNop(),
			func(context.Context, *Runtime) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "--"+MetricsTokenFileFlag) || !strings.Contains(err.Error(), "--"+MetricsAllowUnauthenticatedFlag) {
			t.Errorf("admin on %s without a token: %v, want a refusal naming both flags", addr, err)
		}
	}
	for _, o := range []Options{{AdminAddr: "127.0.0.1:0"}, {AdminAddr: "localhost:0"}, {AdminAddr: ":0", MetricsAllowUnauthenticated: true}} {
		o.StopTimeout = 5 * time.Second
		_, stop := runService(t, o)
		if err := stop(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := metricsToken(Options{AdminAddr: ":0", MetricsTokenFile: bad}); err == nil {
		t.Error("an empty token file was accepted")
	}
}

// TestMetricsRequireTheBearerToken: with --metrics-token-file, /metrics
// answers 401 without the token or with another, and the metrics with
// it; the probes stay open.
func TestMetricsRequireTheBearerToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, stop := runService(t, Options{AdminAddr: ":0", MetricsTokenFile: file, StopTimeout: 5 * time.Second})
	defer func() { _ = stop() }()
	rt.SetReady(true)
	_, port, _ := net.SplitHostPort(rt.AdminAddr)
	base := "http://127.0.0.1:" + port
	get := func(path, auth string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", path)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/metrics", "", 401}, {"/metrics", "Bearer wrong", 401}, {"/metrics", "Bearer s3cret-toke", 401},
		{"/metrics", "s3cret-token", 401}, {"/metrics", "Basic s3cret-token", 401},
		{"/metrics", "Bearer s3cret-token", 200},
		{"/healthz", "", 200}, {"/readyz", "", 200},
	} {
		if got := get(tc.path, tc.auth); got != tc.want {
			t.Errorf("GET %s with %q: %d, want %d", tc.path, tc.auth, got, tc.want)
		}
	}
}
