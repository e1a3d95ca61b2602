package service

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestProbeAddr(t *testing.T) {
	cases := []struct{ listen, want, wantErr string }{
		{":9090", "127.0.0.1:9090", ""},
		{"0.0.0.0:9090", "127.0.0.1:9090", ""},
		{"[::]:9090", "[::1]:9090", ""},
		{"127.0.0.1:9091", "127.0.0.1:9091", ""},
		{"admission:9090", "admission:9090", ""},
		{"9090", "", "admin address"},
	}
	for _, tc := range cases {
		got, err := probeAddr(tc.listen)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("probeAddr(%q) error %v, want it to mention %q", tc.listen, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("probeAddr(%q) = %q, %v; want %q", tc.listen, got, err, tc.want)
		}
	}
}

// TestHealthcheckProbesReadiness runs a real admin server on ":port" (all
// interfaces, as in a container) and checks that Healthcheck fails until the
// service is ready, passes once it is, and fails once it has stopped.
func TestHealthcheckProbesReadiness(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	lis.Close()
	o := Options{AdminAddr: ":" + port, StopTimeout: 5 * time.Second, MetricsAllowUnauthenticated: true}

	rt, stop := runService(t, o)
	if err := Healthcheck(o); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("healthcheck before ready: %v, want a 503 error", err)
	}
	rt.SetReady(true)
	if err := Healthcheck(o); err != nil {
		t.Errorf("healthcheck when ready: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := Healthcheck(o); err == nil {
		t.Error("healthcheck passed with the service stopped")
	}
}
