package service

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// /metrics names every namespace, queue and quota, so it is no more
// public than the API: Kueue serves its metrics behind authentication.
// The admin server listens on loopback by default (--admin-addr
// 127.0.0.1:9090), where only the host (in Kubernetes, the pod) reaches
// it. Bound elsewhere (a pod's kubelet probes /healthz and /readyz on
// the pod IP), /metrics needs --metrics-token-file: a request without
// `Authorization: Bearer <token>` gets 401. A service asked to bind
// elsewhere without a token does not start, unless
// --metrics-allow-unauthenticated says that was meant. /healthz and
// /readyz stay open: they say nothing about tenants.

const (
	// MetricsTokenFileFlag names the file of /metrics' bearer token.
	MetricsTokenFileFlag = "metrics-token-file"
	// MetricsAllowUnauthenticatedFlag lets /metrics be served without a
	// token on an address other than loopback.
	MetricsAllowUnauthenticatedFlag = "metrics-allow-unauthenticated"
	// maxMetricsToken bounds the token file.
	maxMetricsToken = 4096
)

// loopbackAddr says whether a listen address reaches only this host.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsToken reads the token /metrics requires ("" for none), and
// refuses an admin address that would serve /metrics to the network
// without one nobody chose.
func metricsToken(o Options) (string, error) {
	if o.MetricsTokenFile == "" {
		if !loopbackAddr(o.AdminAddr) && !o.MetricsAllowUnauthenticated {
			return "", fmt.Errorf("--admin-addr %q is not a loopback address, and /metrics lists every namespace, queue and quota: "+
				"give --%s (callers send Authorization: Bearer <token>), bind 127.0.0.1, or pass --%s to serve it to anyone who reaches the address",
				o.AdminAddr, MetricsTokenFileFlag, MetricsAllowUnauthenticatedFlag)
		}
		return "", nil
	}
	b, err := os.ReadFile(o.MetricsTokenFile)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", MetricsTokenFileFlag, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || len(token) > maxMetricsToken || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("--%s %s: want one token of 1 to %d characters without spaces", MetricsTokenFileFlag, o.MetricsTokenFile, maxMetricsToken)
	}
	return token, nil
}

// requireBearer serves next only to requests that carry the token; an
// empty token requires nothing. The comparison takes the same time
// whatever the guess (hashes of equal length, compared in constant time).
func requireBearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="jetqueue-metrics"`)
			http.Error(w, "Unauthorized: /metrics requires Authorization: Bearer <token> (--metrics-token-file)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
