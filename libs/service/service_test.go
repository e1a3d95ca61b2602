package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
)

func TestEnvFallsBackForUnsetFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"default", nil, nil, "127.0.0.1:9090", ""},
		{"environment", nil, map[string]string{"JQ_ADMIN_ADDR": ":1"}, ":1", ""},
		{"flag wins over environment", []string{"--admin-addr", ":2"}, map[string]string{"JQ_ADMIN_ADDR": ":1"}, ":2", ""},
		{"bad environment value names the variable", nil, map[string]string{"JQ_STOP_TIMEOUT": "soon"}, "", "JQ_STOP_TIMEOUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var o Options
			RegisterFlags(fs, &o)
			err := Parse(fs, tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to name %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || o.AdminAddr != tc.want {
				t.Fatalf("admin-addr %q err %v, want %q", o.AdminAddr, err, tc.want)
			}
		})
	}
}

// TestReadinessFollowsTheLifecycle: /readyz is 503 until the service says
// it is ready, and goes 503 again before the service drains.
func TestReadinessFollowsTheLifecycle(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	drained := make(chan bool, 1)
	readyAtDrain := make(chan bool, 1)
	var rtRef *Runtime
	errc := make(chan error, 1)
	go func() {
		errc <- RunContext(ctx, "test", Options{AdminAddr: "127.0.0.1:0", StopTimeout: 5 * time.Second}, zap.NewNop(),
			func(ctx context.Context, rt *Runtime) error {
				rtRef = rt
				addr <- rt.AdminAddr
				<-ctx.Done()
				readyAtDrain <- rt.ready.Load()
				drained <- true
				return nil
			})
	}()
	a := <-addr
	get := func(path string) int {
		resp, err := http.Get("http://" + a + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("readyz before ready: %d", got)
	}
	rtRef.SetReady(true)
	if got := get("/readyz"); got != http.StatusOK {
		t.Errorf("readyz when ready: %d", got)
	}
	if got := get("/healthz"); got != http.StatusOK {
		t.Errorf("healthz: %d", got)
	}
	if got := get("/metrics"); got != http.StatusOK {
		t.Errorf("metrics: %d", got)
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !<-drained || <-readyAtDrain {
		t.Error("readiness was still on while draining")
	}
}

// TestCommandRefusesUnknownSubcommands: a service binary takes flags and,
// optionally, the healthcheck subcommand; anything else is an error that
// names it, before anything starts.
func TestCommandRefusesUnknownSubcommands(t *testing.T) {
	type cfg struct{ Shard string }
	register := func(fs *flag.FlagSet, c *cfg) { fs.StringVar(&c.Shard, "shard", "s-0", "shard") }
	ran := false
	run := func(context.Context, *Runtime, cfg) error { ran = true; return nil }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, `unknown command "serve"`},
		{[]string{"--shard", "x", "migrate"}, `unknown command "migrate"`},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		err := command("svc", tc.args, register, run)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if ran {
		t.Error("the service ran despite bad arguments")
	}
}

// TestAFailedMainIsStartedAgain: a main that fails (NATS restarting, a
// request timing out) is started again in the process, with readiness off
// in between and a fresh registry for its collectors, until it runs; only a
// Permanent error ends the service.
func TestAFailedMainIsStartedAgain(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var runs atomic.Int32
	running := make(chan *Runtime, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- RunContext(ctx, "test", Options{AdminAddr: "127.0.0.1:0", StopTimeout: 5 * time.Second}, zap.NewNop(),
			func(ctx context.Context, rt *Runtime) error {
				// Registering the same collector on every run would panic
				// on a registry that outlived the failed run.
				rt.Registry.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_runs_total", Help: "runs"}))
				if runs.Add(1) <= 3 {
					return errors.New("nats: connection closed")
				}
				rt.SetReady(true)
				running <- rt
				<-ctx.Done()
				return nil
			})
	}()
	select {
	case rt := <-running:
		if got := rt.Restarts(); got != 3 {
			t.Errorf("restarts = %d, want 3", got)
		}
		resp, err := http.Get("http://" + rt.AdminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"jetqueue_service_restarts_total 3", "test_runs_total 0"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	case err := <-errc:
		t.Fatalf("the service exited after a fault: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("main was not started again")
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != 4 {
		t.Errorf("main ran %d times, want 4", got)
	}
}

// TestAPermanentErrorEndsTheService: a configuration that cannot work is
// not retried.
func TestAPermanentErrorEndsTheService(t *testing.T) {
	var runs atomic.Int32
	err := RunContext(context.Background(), "test", Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
		func(ctx context.Context, rt *Runtime) error {
			runs.Add(1)
			return Permanent(errors.New("--inventory: \"x\""))
		})
	if err == nil || err.Error() != `--inventory: "x"` {
		t.Fatalf("err = %v, want the permanent error", err)
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("main ran %d times, want 1", got)
	}
}

// TestASecondShardIsRefused: a shard is only a lease key, so a second
// admission shard would be a second leader deciding the same quota. It is
// refused at start, and not retried.
func TestASecondShardIsRefused(t *testing.T) {
	var runs atomic.Int32
	// Retried, it would run until this stops it.
	stop, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := RunContext(stop, "admission", Options{AdminAddr: "127.0.0.1:0"}, zap.NewNop(),
		func(ctx context.Context, rt *Runtime) error {
			runs.Add(1)
			_, _, err := bus.Member{NATSURL: "nats://127.0.0.1:1", Shard: "admission-1"}.Join(ctx, rt.Log, "admission")
			return err
		})
	want := `--shard "admission-1": admission runs as one shard, admission-0 (more replicas are standbys of it)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("main ran %d times, want 1", got)
	}
}
