// Package service is the runtime every jetqueue service shares: flags with
// JQ_-prefixed environment fallbacks, zap logging, one admin port serving
// /healthz, /readyz and /metrics (loopback, or behind a bearer token:
// metricsauth.go), a profiler on a loopback address when
// asked (--pprof-addr), and an orderly stop on SIGTERM:
// readiness off → the service's own drain (consumers, publishes) → close.
// A service's main is then a few lines: declare flags, call Run.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
)

// Runtime is what a running service gets from Run.
type Runtime struct {
	Name string
	Log  *zap.Logger
	// Registry holds the collectors of the current run of the service's
	// main: a main restarted after a fault registers its collectors again
	// on a fresh one (see supervise).
	Registry *prometheus.Registry
	// base holds what outlives a restart: the Go and process collectors,
	// the skipped-event and restart counters.
	base     *prometheus.Registry
	current  atomic.Pointer[prometheus.Registry]
	restarts prometheus.Counter
	// restartCount mirrors restarts for tests and the chaos suite's logs.
	restartCount atomic.Int64
	ready        atomic.Bool
	// AdminAddr is the address the admin server listens on.
	AdminAddr string
	// PprofAddr is the address the profiler listens on; empty when off.
	PprofAddr string
	skipped   skipped
}

// SetReady flips /readyz; services call it once they can serve.
func (r *Runtime) SetReady(ok bool) { r.ready.Store(ok) }

// Options are the flags every service has.
type Options struct {
	AdminAddr   string
	PprofAddr   string
	LogLevel    string
	LogJSON     bool
	StopTimeout time.Duration
	// MetricsTokenFile holds the bearer token /metrics requires; empty:
	// none, which only a loopback AdminAddr or
	// MetricsAllowUnauthenticated allows (metricsauth.go).
	MetricsTokenFile            string
	MetricsAllowUnauthenticated bool
}

// RegisterFlags declares the common flags on fs.
func RegisterFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.AdminAddr, "admin-addr", "127.0.0.1:9090", "address of the admin server (/healthz, /readyz, /metrics); another than loopback needs --"+MetricsTokenFileFlag+" (or --"+MetricsAllowUnauthenticatedFlag+")")
	fs.StringVar(&o.MetricsTokenFile, MetricsTokenFileFlag, "", "file holding the bearer token /metrics requires (Authorization: Bearer <token>); read at start")
	fs.BoolVar(&o.MetricsAllowUnauthenticated, MetricsAllowUnauthenticatedFlag, false, "serve /metrics without a token on an --admin-addr other than loopback: anyone who reaches it reads every namespace, queue and quota")
	fs.StringVar(&o.PprofAddr, PprofFlag, "", "address of a Go profiler (net/http/pprof under /debug/pprof/), loopback only, such as 127.0.0.1:6060; empty: off")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&o.LogJSON, "log-json", true, "log as JSON (false: human-readable console)")
	fs.DurationVar(&o.StopTimeout, "stop-timeout", 20*time.Second, "how long a stop may take to drain before the process exits")
}

// EnvName is the environment variable that backs a flag: JQ_ and the flag
// name in upper case with dashes as underscores (--admin-addr: JQ_ADMIN_ADDR).
func EnvName(flagName string) string {
	return "JQ_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args, taking a flag's value from its environment variable
// when the flag is not on the command line. An environment value that does
// not parse is an error naming the variable.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v := getenv(EnvName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// Main is the body of a service: it runs until ctx ends, then drains and
// returns. Readiness is already off when ctx ends.
type Main func(ctx context.Context, rt *Runtime) error

// Run starts logging and the admin server, runs main until SIGTERM or
// SIGINT (or main returns), and gives main StopTimeout to finish draining.
func Run(name string, o Options, main Main) error {
	log, err := newLogger(o)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return RunContext(ctx, name, o, log, main)
}

// RunContext is Run with the stop signal given as a context, for tests and
// for running several services in one process.
func RunContext(ctx context.Context, name string, o Options, log *zap.Logger, main Main) error {
	rt := &Runtime{Name: name, Log: log.With(zap.String("service", name)), base: prometheus.NewRegistry(),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "jetqueue_service_restarts_total",
			Help: "Times the service's main failed and was started again in the same process."})}
	rt.base.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), rt.restarts)
	rt.freshRegistry()
	if o.PprofAddr != "" {
		if err := checkPprofAddr(o.PprofAddr); err != nil {
			return err
		}
	}
	token, err := metricsToken(o)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", o.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin server: %w", err)
	}
	rt.AdminAddr = lis.Addr().String()
	admin := &http.Server{Handler: rt.adminHandler(token), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = admin.Serve(lis) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = admin.Shutdown(sctx)
	}()
	if o.PprofAddr != "" {
		addr, stop, err := listenPprof(o.PprofAddr)
		if err != nil {
			return err
		}
		defer stop()
		rt.PprofAddr = addr
		rt.Log.Info("profiler listening", zap.String("addr", addr))
	}

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	done := make(chan error, 1)
	go func() { done <- rt.supervise(runCtx, main) }()
	select {
	case err := <-done:
		rt.SetReady(false)
		return err
	case <-ctx.Done():
	}
	rt.Log.Info("stopping: readiness off, draining")
	rt.SetReady(false)
	cancelRun()
	timeout := o.StopTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	select {
	case err := <-done:
		rt.Log.Info("stopped")
		if errors.Is(err, context.Canceled) {
			// Stopped while starting up: the stop, not a failure.
			return nil
		}
		return err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not drain within %s", name, timeout)
	}
}

func (r *Runtime) adminHandler(metricsToken string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !r.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
		if n, last := r.Skipped(); n > 0 {
			_, _ = fmt.Fprintf(w, "skipped %d event(s) that could not be applied; last: %s\n", n, last)
		}
	})
	mux.Handle("GET /metrics", requireBearer(metricsToken, promhttp.HandlerFor(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return prometheus.Gatherers{r.base, r.current.Load()}.Gather()
	}), promhttp.HandlerOpts{})))
	return mux
}

func newLogger(o Options) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	if !o.LogJSON {
		cfg = zap.NewDevelopmentConfig()
	}
	lvl, err := zap.ParseAtomicLevel(o.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg.Level = lvl
	return cfg.Build()
}

// Command is a service binary's whole main: it declares the common flags
// and the service's own (register), parses the arguments with their JQ_
// environment fallbacks, answers the healthcheck subcommand, and runs the
// service until SIGTERM. It exits 1 with the error on stderr.
func Command[C any](name string, register func(*flag.FlagSet, *C), run func(context.Context, *Runtime, C) error) {
	if err := command(name, os.Args[1:], register, run); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func command[C any](name string, args []string, register func(*flag.FlagSet, *C), run func(context.Context, *Runtime, C) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var o Options
	RegisterFlags(fs, &o)
	var cfg C
	register(fs, &cfg)
	if err := Parse(fs, args, os.Getenv); err != nil {
		return err
	}
	switch fs.Arg(0) {
	case "":
	case HealthcheckCommand:
		return Healthcheck(o)
	default:
		return fmt.Errorf("unknown command %q (the only one is %s)", fs.Arg(0), HealthcheckCommand)
	}
	return Run(name, o, func(ctx context.Context, rt *Runtime) error { return run(ctx, rt, cfg) })
}
