package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// HealthcheckCommand is the first positional argument that makes a service
// binary probe itself instead of running: `ingest healthcheck`. Container
// images without a shell or curl (distroless) use it as their HEALTHCHECK.
const HealthcheckCommand = "healthcheck"

// HealthcheckTimeout bounds one probe.
const HealthcheckTimeout = 3 * time.Second

// Healthcheck probes the /readyz of the service whose common flags are o,
// on its admin address, and returns nil when it answers 200. An admin
// address with an unspecified host (":9090", "0.0.0.0:9090", "[::]:9090")
// is probed on the loopback address.
func Healthcheck(o Options) error {
	return healthcheck(context.Background(), o.AdminAddr, HealthcheckTimeout)
}

func healthcheck(ctx context.Context, adminAddr string, timeout time.Duration) error {
	target, err := probeAddr(adminAddr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + target + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// probeAddr turns a listen address into one to dial.
func probeAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("healthcheck: admin address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port), nil
}
