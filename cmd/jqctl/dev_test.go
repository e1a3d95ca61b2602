package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	// The sweep waits at the head of research-gpu's queue and of team-a's
	// gpu LocalQueue.
	for _, args := range [][]string{{"cq", "research-gpu"}, {"lq", "team-a/gpu"}} {
		got := jq(append([]string{"get", "pendingworkloads"}, args...)...)
		if !regexp.MustCompile(`(?m)^POSITION\s+LQ POSITION\s+NAMESPACE\s+NAME\s+LOCALQUEUE\s+PRIORITY\s+CREATED\n0\s+0\s+team-a\s+sweep\s+gpu\s+10\s+\S+\n$`).MatchString(got) {
			t.Errorf("get pendingworkloads %v:\n%s%s", args, got, stderr.String())
		}
	}
	if jq("get", "pendingworkloads", "cq", "nope") != "" || !strings.Contains(stderr.String(), `clusterqueue.visibility.kueue.x-k8s.io "nope" not found`) {
		t.Errorf("get pendingworkloads cq nope: %s", stderr.String())
	}
	// Read-your-writes: what submit accepted, get shows at once.
	var docs []string
	for i := range 20 {
		docs = append(docs, fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"rw%d","namespace":"rw"},`+
			`"spec":{"queueName":"none","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, i))
	}
	batch := filepath.Join(dir, "rw.yaml")
	if err := os.WriteFile(batch, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if jq("submit", "-f", batch) == "" {
		t.Fatalf("submit: %s", stderr.String())
	}
	// With -n, a table has no NAMESPACE column (as kubectl's): a row starts with the name.
	if got := len(regexp.MustCompile(`(?m)^rw\d+\s`).FindAllString(jq("get", "workloads", "-n", "rw"), -1)); got != 20 {
		t.Errorf("get right after submitting 20 shows %d:\n%s%s", got, stdout.String(), stderr.String())
	}
	list := jq("get", "workloads")
	for _, want := range []string{"nightly-etl", "preprocess"} {
		if !regexp.MustCompile(want + `\s.*admitted`).MatchString(list) {
			t.Errorf("demo job %s is not admitted:\n%s", want, list)
		}
	}
	// Every service's metrics address is printed, and serves: Kueue's
	// from admission (the demo's batch queue admitted nightly-etl once),
	// the lags from ingest.
	printed := regexp.MustCompile(`(?m)^\s+(\w+):\s+(http://\S+/metrics)$`).FindAllStringSubmatch(out.String(), -1)
	at := map[string]string{}
	for _, m := range printed {
		at[m[1]] = m[2]
	}
	for _, name := range []string{"ingest", "admission", "preemptor", "podsready", "scorer"} {
		want := map[string]string{"admission": `kueue_admitted_workloads_total{cluster_queue="batch"} 1`,
			"ingest": "jetqueue_admission_lag_events"}[name]
		if want == "" {
			want = "go_goroutines"
		}
		if at[name] == "" {
			t.Errorf("dev printed no metrics address for %s:\n%s", name, out.String())
			continue
		}
		var body string
		eventually(name+" serves "+want, func() bool {
			resp, err := http.Get(at[name])
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == http.StatusOK && strings.Contains(body, want)
		})
	}
	// The load generator runs against it to the end and reports: one
	// workload a queue, each finished after its run time.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"loadtest", "--profile", "burst", "--count", "30", "--runtime", "50ms", "--timeout", "60s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("loadtest: exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"30 ClusterQueues in 5 cohorts, 30 workloads", "wall time", "ClusterQueue usage", "mean time to admission, burst (30)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("loadtest report lacks %q:\n%s", want, stdout.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
}
