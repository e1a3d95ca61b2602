package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestDevServesTheDemo runs `jqctl dev --demo` in-process: the demo loads,
// a Job submitted with jqctl is admitted and placed, and Ctrl-C (the
// context) stops everything cleanly.
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
	if code := run([]string{"submit", "-f", "../../examples/gpu-job.yaml", "--server", server}, &stdout, &stderr); code != 0 {
		t.Fatalf("submit: %s", stderr.String())
	}
	for {
		stdout.Reset()
		if code := run([]string{"describe", "team-a/train", "--server", server}, &stdout, &stderr); code == 0 &&
			strings.Contains(stdout.String(), "admitted") && strings.Contains(stdout.String(), "placed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo job was not admitted and placed:\n%s", stdout.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
}
