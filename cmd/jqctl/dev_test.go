package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestDevServesTheDemo runs `jqctl dev --demo` in-process: the demo loads
// and its jobs are admitted, the README's tour works (a preemption through
// the preemptor service), and Ctrl-C (the context) stops everything
// cleanly.
func TestDevServesTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS, PostgreSQL and the services")
	}
	// Not t.TempDir: its parent is private to root, and a private
	// PostgreSQL runs as the postgres user, which must reach the data.
	dir, err := os.MkdirTemp("", "jqctl-dev-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("DATABASE_URL") != "" {
		t.Setenv("DATABASE_URL", testenv.Postgres(t))
	}
	// dev writes its context here, not into the user's config.
	config := filepath.Join(dir, "jqctl-config")
	t.Setenv("JQCTL_CONFIG", config)
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, devOptions{dataDir: dir, httpAddr: "127.0.0.1:18181", demo: true, examples: "../../examples"}, out, errOut)
	}()
	server := "http://127.0.0.1:18181"
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "jetqueue is running") {
		select {
		case err := <-done:
			t.Fatalf("dev stopped: %v\n%s", err, errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not start: %s %s", out.String(), errOut.String())
		}
	}
	var stdout, stderr bytes.Buffer
	// jq runs jqctl; a failure (a workload not projected yet) is an
	// empty answer.
	jq := func(args ...string) string {
		stdout.Reset()
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code != 0 {
			return ""
		}
		return stdout.String()
	}
	// Authentication is on: without the admin's token, 401.
	resp, err := http.Get(server + "/v1/workloads")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/workloads without a token: %d, want 401", resp.StatusCode)
	}
	// The context dev wrote is current and carries the token: the
	// commands below name no server and no token.
	cfg, err := clientcmd.LoadFromFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "jetqueue-dev" || cfg.Clusters["jetqueue-dev"] == nil || cfg.Clusters["jetqueue-dev"].Server != server {
		t.Errorf("jqctl config: current context %q, clusters %v", cfg.CurrentContext, cfg.Clusters)
	}
	// The README's tour: the sweep takes every GPU, the training job
	// preempts it, and the demo's own jobs are admitted.
	if jq("submit", "-f", "../../examples/sweep-job.yaml") == "" {
		t.Fatalf("submit: %s", stderr.String())
	}
	eventually := func(what string, ok func() bool) {
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s:\n%s", what, stdout.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually("the sweep is admitted", func() bool { return strings.Contains(jq("describe", "team-a/sweep"), "admitted") })
	if jq("submit", "-f", "../../examples/gpu-job.yaml") == "" {
		t.Fatalf("submit: %s", stderr.String())
	}
	eventually("the training job preempts the sweep, and is admitted and placed", func() bool {
		return strings.Contains(jq("describe", "team-a/train"), "placed") &&
			strings.Contains(jq("explain", "team-a/sweep"), "WaitingForQuota")
	})
	list := jq("get", "workloads")
	for _, want := range []string{"nightly-etl", "preprocess"} {
		if !regexp.MustCompile(want + `\s.*admitted`).MatchString(list) {
			t.Errorf("demo job %s is not admitted:\n%s", want, list)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
}
