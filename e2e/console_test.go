package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// chromium is Debian's browser, which the console test drives.
const chromium = "/usr/bin/chromium"

// consoleWorld: a cohort of two queues. gpu has 8 cpu and 4 GPUs, cpu has
// 8 cpu; team-a submits to gpu, team-b to cpu.
const consoleWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: gpu}
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cpu}
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cpu}
`

// consolePolicy: bob may use workloads in team-a only.
const consolePolicy = `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-user}
subjects:
- {kind: User, name: bob}
`

func consoleWorkload(ns, name, cpu, gpu, runtime string) []byte {
	gpus := ""
	if gpu != "" {
		gpus = fmt.Sprintf(`,"nvidia.com/gpu":%q`, gpu)
	}
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q,
 "annotations":{"jetqueue.dev/expected-runtime":%q}},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q%s}}}]}}}]}}`,
		name, ns, runtime, cpu, gpus)
}

// TestConsoleInBrowser drives the web console in headless Chromium
// (e2e/console/console.test.mjs, with playwright-core) against the
// services on real NATS and PostgreSQL, with bearer tokens and an RBAC
// policy. On failure the script keeps screenshots and prints where.
// Without Chromium or playwright-core it skips, unless CI=true, where
// their absence fails.
func TestConsoleInBrowser(t *testing.T) {
	script, err := filepath.Abs("console/console.test.mjs")
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if _, err := os.Stat(chromium); err != nil {
		missing = chromium + " (apt-get install -y chromium)"
	} else if _, err := exec.LookPath("node"); err != nil {
		missing = "node (apt-get install -y nodejs npm)"
	} else if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "playwright-core")); err != nil {
		missing = "playwright-core (npm ci --prefix e2e/console)"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the console's browser test needs %s; CI must install it (.ci/run)", missing)
		}
		t.Skipf("skipping the console's browser test: %s is missing (under CI=true this fails)", missing)
	}

	srv := testenv.NATS(t)
	s := &system{t: t, nats: srv.ClientURL(), db: testenv.Postgres(t), manual: true}
	t.Cleanup(s.close)
	s.stopAdmission = s.startAdmission("a")
	s.stopPreemptor = s.startPreemptor("a")
	s.stopPodsReady = s.startPodsReady("a")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("admin-token,admin,1,system:masters\nbob-token,bob,2,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	roles, err := os.ReadFile("../deploy/auth/roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, append(roles, consolePolicy...), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	s.run("ingest", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.nats, DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0",
			Auth: auth.Options{TokenAuthFile: tokens, AuthorizationPolicyFile: policy}, ManualClock: true,
			Listening: func(a string) { addr <- a }})
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-time.After(2 * time.Minute):
		t.Fatal("ingest did not start")
	}
	admin := func(method, path string, body []byte, want int) {
		t.Helper()
		req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer admin-token")
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/yaml")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, data)
		}
	}
	admin("POST", "/v1/apply", []byte(consoleWorld), http.StatusOK)
	// train holds gpu's 4 GPUs (and 2 of its cpu) for 2h; etl borrows 4
	// cpu from gpu's unused 6 for 1h; sweep waits for train's GPUs,
	// report for cpu (2+12 of the cohort's 16 are held; it asks 4).
	admin("POST", "/v1/workloads", consoleWorkload("team-a", "train", "2", "4", "2h"), http.StatusAccepted)
	admin("POST", "/v1/workloads", consoleWorkload("team-b", "etl", "12", "", "1h"), http.StatusAccepted)
	admin("POST", "/v1/workloads", consoleWorkload("team-a", "sweep", "1", "2", "30m"), http.StatusAccepted)
	admin("POST", "/v1/workloads", consoleWorkload("team-b", "report", "4", "", "10m"), http.StatusAccepted)
	admin("GET", "/v1/sync?timeout=30s", nil, http.StatusOK)
	admin("POST", "/v1/debug/clock/advance", []byte(`{"duration":"10m"}`), http.StatusOK)

	shots := filepath.Join(os.TempDir(), fmt.Sprintf("jetqueue-console-%d", time.Now().UnixNano()))
	cmd := exec.Command("node", script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "JQ_BASE="+s.base, "JQ_CHROMIUM="+chromium, "JQ_SHOTS="+shots,
		"JQ_ADMIN_TOKEN=admin-token", "JQ_BOB_TOKEN=bob-token", "JQ_README_SHOT="+os.Getenv("JQ_README_SHOT"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("console.test.mjs:\n%s", out.String())
	if err != nil {
		t.Fatalf("the browser test failed (%v); screenshots are in %s", err, shots)
	}
	_ = os.RemoveAll(shots)

	// The stream the console reads shows bob only team-a's workloads: a
	// team-b submission published before a team-a one never reaches him.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/v1/watch/workloads", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer bob-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("watch as bob: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	admin("POST", "/v1/workloads", consoleWorkload("team-b", "hidden", "1", "", "1m"), http.StatusAccepted)
	admin("POST", "/v1/workloads", consoleWorkload("team-a", "seen", "1", "", "1m"), http.StatusAccepted)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "team-b") {
			t.Fatalf("bob was sent a team-b event: %s", line)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"name":"seen"`) {
			break
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("GET", s.base+"/v1/watch/workloads?namespace=team-b", nil)
	req.Header.Set("Authorization", "Bearer bob-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("watch team-b as bob: %v %v, want 403", err, resp)
	} else {
		resp.Body.Close()
	}
}
