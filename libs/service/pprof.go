package service

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// PprofFlag is the flag that turns the profiler on.
const PprofFlag = "pprof-addr"

// checkPprofAddr refuses a profiler address that is not loopback. The
// profiler has no authentication, and a CPU profile or a trace costs the
// service CPU for as long as it is asked to run: anyone who can reach it
// can slow the service down and read its heap. On a loopback address only
// the host (in Kubernetes, the pod: `kubectl port-forward`) reaches it.
func checkPprofAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--%s: %q: %w", PprofFlag, addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--%s: %q: the profiler serves only on a loopback IP address (127.0.0.1:%s or [::1]:%s): it has no authentication",
			PprofFlag, addr, port, port)
	}
	return nil
}

// listenPprof starts the profiler's server on addr, which checkPprofAddr
// has accepted, and returns the address it listens on and its stop.
func listenPprof(addr string) (string, func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--%s: %w", PprofFlag, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or a trace answers only after the
	// seconds it was asked for.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() { _ = srv.Close() }, nil
}
