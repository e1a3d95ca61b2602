package service

import (
	"context"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
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
