package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// startStack runs ingest (anonymous) and admission on a real NATS and
// PostgreSQL and returns ingest's URL.
func startStack(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts NATS, PostgreSQL and two services")
	}
	nats, db := testenv.NATS(t).ClientURL(), testenv.Postgres(t)
	runSvc := func(name string, main service.Main) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- service.RunContext(ctx, name, service.Options{AdminAddr: "127.0.0.1:0", StopTimeout: 10 * time.Second}, zap.NewNop(), main)
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	runSvc("admission", func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, admission.Config{Member: bus.Member{NATSURL: nats, Shard: "admission-0", Instance: "a", LeaseTTL: 2 * time.Second}})
	})
	addr := make(chan string, 1)
	runSvc("ingest", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: nats, DatabaseURL: db, HTTPAddr: "127.0.0.1:0", Auth: auth.Options{Anonymous: true},
			Listening: func(a string) { addr <- a }})
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("ingest did not start")
	}
	return ""
}

const habitsConfig = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "2"}, {name: memory, nominalQuota: 36Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq}
spec: {clusterQueue: cq}
`

func habitsWorkload(name, team string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: ns, labels: {team: %s}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 12Gi}}}]}}
`, name, team)
}

// TestKubectlHabits runs jqctl as a kubectl user would, against ingest
// and admission on real NATS and PostgreSQL: short names, namespaces,
// selectors, cli-runtime's output formats, human units, apply -n,
// --dry-run=server, diff, delete -f, version, completion, -w and
// kueuectl's list.
func TestKubectlHabits(t *testing.T) {
	server := startStack(t)
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jq := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		root := newRoot(&stdout, &stderr)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(append([]string{args[0], "--server", server}, args[1:]...))
		code := 0
		if err := root.Execute(); err != nil {
			var ee exitError
			if ok := asExit(err, &ee); ok {
				code = ee.code
			} else {
				code = 2
				stderr.WriteString(err.Error())
			}
		}
		return stdout.String(), stderr.String(), code
	}
	want := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	sync := func() {
		t.Helper()
		resp, err := http.Get(server + "/v1/sync?timeout=30s")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("sync: %v %v", err, resp)
		}
		resp.Body.Close()
	}

	out, errOut, code := jq("", "apply", "-n", "ns", "-f", file("config.yaml", habitsConfig))
	want("apply -n", out, "resourceflavor/rf created\nclusterqueue/cq created\nlocalqueue/ns/lq created\n")
	if code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	_, errOut, code = jq("", "apply", "-n", "other", "-f", file("lq.yaml", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq}\n"))
	if code != 2 || !strings.Contains(errOut, `the namespace from the provided object "ns" does not match the namespace "other"`) {
		t.Errorf("apply -n other of an object in ns: exit %d, %s", code, errOut)
	}
	for i, team := range []string{"a", "a", "b"} {
		if _, errOut, code := jq("", "submit", "-f", file("w.yaml", habitsWorkload(fmt.Sprint("w", i), team))); code != 0 {
			t.Fatalf("submit: %s", errOut)
		}
	}
	sync()

	out, _, _ = jq("", "get", "wl", "-n", "ns", "-o", "name")
	want("get wl -o name", out, "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\nworkload.kueue.x-k8s.io/w2\n")
	out, _, _ = jq("", "get", "workloads", "-n", "ns", "-l", "team=a", "-o", "name")
	want("get -l team=a", out, "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\n")
	out, _, _ = jq("", "get", "wl", "-A", "--field-selector", "status=pending", "-o", "custom-columns=NAME:.metadata.name,NS:.metadata.namespace,QUEUE:.spec.queueName")
	want("get -A --field-selector status=pending -o custom-columns", out, "NAME   NS    QUEUE\nw2     ns    lq\n")
	out, _, _ = jq("", "get", "cq", "cq", "-o", "jsonpath={.status.admittedWorkloads} {.status.pendingWorkloads} {.status.flavorsReservation[0].resources[1].total}")
	want("get cq -o jsonpath", out, "2 1 24Gi")
	out, _, _ = jq("", "get", "cq", "-o", "wide")
	if !strings.Contains(out, "rf: cpu 2/2, memory 24Gi/36Gi") {
		t.Errorf("get cq -o wide: no reservation in human units:\n%s", out)
	}
	out, _, _ = jq("", "get", "wl", "w2", "-n", "ns", "-o", "wide", "--no-headers")
	if f := strings.Fields(out); len(f) < 6 || f[0] != "w2" || f[1] != "lq" || f[3] != "0" || f[4] != "pending" || f[5] != "Pending" ||
		!strings.HasSuffix(strings.TrimSpace(out), "cpu 1, memory 12Gi") {
		t.Errorf("get wl w2 -o wide:\n%s", out)
	}
	// The ETA and the assumption it rests on: w0 and w1 hold the quota
	// with no run time known (no annotation, no finished run).
	noETA := "no estimate: 2 admitted run(s) have no jetqueue.dev/expected-runtime annotation"
	if !strings.Contains(out, "   unknown   "+noETA) {
		t.Errorf("get wl w2 -o wide: no ETA column with its assumption:\n%s", out)
	}
	out, _, _ = jq("", "explain", "ns/w2")
	if !strings.Contains(out, "ETA:       unknown\n           "+noETA) {
		t.Errorf("explain ns/w2: no ETA with its assumption:\n%s", out)
	}
	out, _, _ = jq("", "describe", "cq", "cq")
	if !strings.HasPrefix(out, "Name:         cq\nLabels:       <none>\nAPI Version:  kueue.x-k8s.io/v1beta1\nKind:         ClusterQueue\nSpec:\n") ||
		!strings.Contains(out, "Status:\n  admittedWorkloads: 2\n") {
		t.Errorf("describe cq:\n%s", out)
	}
	out, _, _ = jq("", "describe", "wl", "w2", "-n", "ns")
	if !strings.Contains(out, "Name:          ns/w2\n") || !strings.Contains(out, "Status:        pending\n") {
		t.Errorf("describe wl:\n%s", out)
	}
	out, _, _ = jq("", "list", "workload", "-n", "ns", "--status", "admitted", "-o", "name")
	want("list workload --status admitted", out, "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\n")
	out, _, _ = jq("", "list", "lq", "-A", "-c", "cq", "-o", "name")
	want("list lq -c cq", out, "localqueue.kueue.x-k8s.io/lq\n")
	out, _, _ = jq("", "list", "cq", "--active", "false", "-o", "name")
	want("list cq --active false", out, "")

	// The read-back object applies unchanged; --dry-run=server changes
	// nothing; diff shows what apply would change.
	cqYAML, _, _ := jq("", "get", "cq", "cq", "-o", "yaml")
	out, _, _ = jq(cqYAML, "apply", "-f", "-")
	want("get cq -o yaml | apply -f -", out, "clusterqueue/cq unchanged\n")
	out, _, code = jq(cqYAML, "diff", "-f", "-")
	if code != 0 || out != "" {
		t.Errorf("diff of the read-back object: exit %d\n%s", code, out)
	}
	bigger := strings.Replace(habitsConfig, `nominalQuota: "2"`, `nominalQuota: "3"`, 1)
	out, _, _ = jq("", "apply", "--dry-run=server", "-n", "ns", "-f", file("bigger.yaml", bigger))
	want("apply --dry-run=server", out, "resourceflavor/rf unchanged (server dry run)\nclusterqueue/cq updated (server dry run)\nlocalqueue/ns/lq unchanged (server dry run)\n")
	out, _, _ = jq("", "get", "cq", "cq", "-o", "jsonpath={.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota}")
	want("nominal quota after a dry run", out, "2")
	out, _, code = jq("", "diff", "-n", "ns", "-f", file("bigger.yaml", bigger))
	if code != 1 || !strings.Contains(out, `-        nominalQuota: "2"`) || !strings.Contains(out, `+        nominalQuota: "3"`) {
		t.Errorf("diff of a changed quota: exit %d\n%s", code, out)
	}

	// -w: the list, then each change as it happens.
	ctx, cancel := context.WithCancel(context.Background())
	var watched syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		root := newRoot(&watched, &bytes.Buffer{})
		root.SetArgs([]string{"get", "wl", "-n", "ns", "-w", "-o", "custom-columns=NAME:.metadata.name,STATUS:.status.conditions[0].type", "--server", server})
		_ = root.ExecuteContext(ctx)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(watched.String(), "w2") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, errOut, code := jq("", "submit", "-f", file("w.yaml", habitsWorkload("w3", "b"))); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	for !strings.Contains(watched.String(), "w3 ") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(watched.String(), "w3 ") {
		t.Errorf("get -w did not show w3:\n%s", watched.String())
	}

	// Completion of object names; delete by short name and by file.
	out, _, _ = jq("", "__complete", "get", "cq", "")
	want("completion of ClusterQueue names", out, "cq\n:4\n")
	out, _, _ = jq("", "__complete", "delete", "wl", "-n", "ns", "w")
	want("completion of Workload names", out, "w0\nw1\nw2\nw3\n:4\n")
	out, _, _ = jq("", "delete", "wl", "w3", "-n", "ns")
	want("delete wl", out, "workload/ns/w3 deleted\n")
	wpc := file("wpc.yaml", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\n")
	if _, errOut, code := jq("", "apply", "-f", wpc); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	out, errOut, _ = jq("", "delete", "-f", wpc)
	want("delete -f (stderr)", errOut, "")
	want("delete -f", out, "workloadpriorityclass/high deleted\n")
	out, errOut, code = jq("", "get", "wpc")
	if code != 0 || out != "" || errOut != "No resources found.\n" {
		t.Errorf("get wpc after delete: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = jq("", "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"serverVersion"`) || !strings.Contains(out, `"clientVersion"`) {
		t.Errorf("version: exit %d\n%s", code, out)
	}
}

func asExit(err error, ee *exitError) bool {
	e, ok := err.(exitError)
	if ok {
		*ee = e
	}
	return ok
}

// TestKueuectlVerbs: create clusterqueue|localqueue|resourceflavor with
// kueuectl's flags, and stop|resume clusterqueue: stop drains the admitted
// workloads (HoldAndDrain, Evicted with reason ClusterQueueStopped),
// --keep-already-running keeps them (Hold), resume admits again.
func TestKueuectlVerbs(t *testing.T) {
	server := startStack(t)
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "none"))
	jq := func(args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{args[0], "--server", server}, args[1:]...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	want := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	sync := func() {
		t.Helper()
		resp, err := http.Get(server + "/v1/sync?timeout=30s")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("sync: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	out, errOut, _ := jq("create", "resourceflavor", "tainted", "--node-labels", "tier=spot", "--node-taints", "spot=true:NoSchedule")
	want("create rf", out+errOut, "resourceflavor.kueue.x-k8s.io/tainted created\n")
	out, errOut, _ = jq("create", "rf", "rf")
	want("create rf", out+errOut, "resourceflavor.kueue.x-k8s.io/rf created\n")
	out, errOut, _ = jq("create", "cq", "cq", "--cohort", "all", "--nominal-quota", "rf:cpu=2;memory=8Gi", "--borrowing-limit", "rf:cpu=1",
		"--queuing-strategy", "StrictFIFO", "--reclaim-within-cohort", "Any")
	want("create cq", out+errOut, "clusterqueue.kueue.x-k8s.io/cq created\n")
	sync() // the reads below are of the projection
	out, _, _ = jq("get", "cq", "cq", "-o", "jsonpath={.spec.cohort} {.spec.queueingStrategy} {.spec.preemption.reclaimWithinCohort} "+
		"{.spec.resourceGroups[0].coveredResources} {.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota} "+
		"{.spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit} {.spec.resourceGroups[0].flavors[0].resources[1].nominalQuota}")
	want("the created ClusterQueue", out, `all StrictFIFO Any ["cpu","memory"] 2 1 8Gi`)
	out, _, _ = jq("get", "rf", "tainted", "-o", "jsonpath={.spec.nodeLabels.tier} {.spec.nodeTaints[0].key}={.spec.nodeTaints[0].value}:{.spec.nodeTaints[0].effect}")
	want("the created ResourceFlavor", out, "spot spot=true:NoSchedule")
	_, errOut, code := jq("create", "lq", "lq2", "-n", "ns", "-c", "nope")
	if code == 0 || !strings.Contains(errOut, `ClusterQueue "nope"`) {
		t.Errorf("create lq of an unknown ClusterQueue: exit %d %s", code, errOut)
	}
	out, _, _ = jq("create", "lq", "lq2", "-n", "ns", "-c", "nope", "-i")
	want("create lq -i", out, "localqueue.kueue.x-k8s.io/lq2 created\n")
	out, _, _ = jq("create", "lq", "lq", "-n", "ns", "-c", "cq")
	want("create lq", out, "localqueue.kueue.x-k8s.io/lq created\n")
	for _, name := range []string{"w0", "w1"} {
		wl := strings.Replace(habitsWorkload(name, "a"), "memory: 12Gi", "memory: 1Gi", 1)
		if _, errOut, code := runWithStdin(server, wl, "submit", "-f", "-"); code != 0 {
			t.Fatalf("submit: %s", errOut)
		}
	}
	sync()
	states := func() string {
		t.Helper()
		out, _, _ := jq("get", "wl", "-n", "ns", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.status.conditions[?(@.type=="Admitted")].status}:{.status.conditions[?(@.type=="Evicted")].reason} {end}`)
		return out
	}
	want("admitted before stop", states(), "w0:True: w1:True: ")
	out, _, _ = jq("stop", "clusterqueue", "cq")
	want("stop cq", out, "clusterqueue.kueue.x-k8s.io/cq stopped\n")
	sync()
	want("HoldAndDrain evicts the admitted", states(), "w0:False:ClusterQueueStopped w1:False:ClusterQueueStopped ")
	out, _, _ = jq("get", "cq", "cq", "-o", `jsonpath={.spec.stopPolicy} {.status.conditions[?(@.type=="Active")].reason}`)
	want("stopped ClusterQueue", out, "HoldAndDrain Stopped")
	out, _, _ = jq("resume", "cq", "cq")
	want("resume cq", out, "clusterqueue.kueue.x-k8s.io/cq resumed\n")
	sync()
	want("admitted again after resume", states(), "w0:True:ClusterQueueStopped w1:True:ClusterQueueStopped ")
	// A workload stopped leaves its quota (Evicted InactiveWorkload) to the
	// one waiting; resumed, it waits in its queue again.
	wl := strings.Replace(habitsWorkload("w2", "a"), "memory: 12Gi", "memory: 1Gi", 1)
	if _, errOut, code := runWithStdin(server, wl, "submit", "-f", "-"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	sync()
	want("w2 waits", states(), "w0:True:ClusterQueueStopped w1:True:ClusterQueueStopped w2:: ")
	out, _, _ = jq("stop", "workload", "w0", "-n", "ns")
	want("stop workload", out, "workload.kueue.x-k8s.io/w0 stopped\n")
	sync()
	want("w0 deactivated, w2 admitted", states(), "w0:False:InactiveWorkload w1:True:ClusterQueueStopped w2:True: ")
	out, _, _ = jq("get", "wl", "w0", "-n", "ns", "-o", "jsonpath={.spec.active}")
	want("w0's spec.active", out, "false")
	out, _, _ = jq("resume", "wl", "ns/w0")
	want("resume workload", out, "workload.kueue.x-k8s.io/w0 resumed\n")
	sync()
	out, _, _ = jq("get", "wl", "-n", "ns", "--field-selector", "status=pending", "-o", "jsonpath={.items[*].metadata.name} {.items[*].spec.active}")
	want("w0 pending again", out, "w0 true")
	out, _, _ = jq("stop", "cq", "cq", "--keep-already-running")
	want("stop --keep-already-running", out, "clusterqueue.kueue.x-k8s.io/cq stopped\n")
	sync()
	out, _, _ = jq("get", "cq", "cq", "-o", `jsonpath={.spec.stopPolicy} {.status.admittedWorkloads}`)
	want("Hold keeps the admitted", out, "Hold 2")
	if _, errOut, code := jq("stop", "wl", "nope", "-n", "ns"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("stop an unknown workload: exit %d %s", code, errOut)
	}
}

// runWithStdin runs jqctl with standard input.
func runWithStdin(server, stdin string, args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	root := newRoot(&stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{args[0], "--server", server}, args[1:]...))
	if err := root.Execute(); err != nil {
		stderr.WriteString(err.Error())
		return stdout.String(), stderr.String(), 2
	}
	return stdout.String(), stderr.String(), 0
}

// TestStopResumeLocalQueue: kueuectl's stop|resume localqueue set the
// LocalQueue's stopPolicy. Stopped (HoldAndDrain), the workloads it
// admitted are evicted with reason LocalQueueStopped and the rest wait
// with Kueue's QuotaReserved condition; its Active condition is False,
// reason Stopped. Another LocalQueue of the same ClusterQueue is
// untouched. Resumed, its workloads are admitted again. A Workload
// exported from Kueue (kubectl get -o yaml, with status) is submitted
// with its status ignored.
func TestStopResumeLocalQueue(t *testing.T) {
	server := startStack(t)
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "none"))
	jq := func(args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{args[0], "--server", server}, args[1:]...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	want := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	sync := func() {
		t.Helper()
		resp, err := http.Get(server + "/v1/sync?timeout=30s")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("sync: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	for _, args := range [][]string{{"create", "rf", "rf"}, {"create", "cq", "cq", "--nominal-quota", "rf:cpu=3;memory=8Gi"},
		{"create", "lq", "lq", "-n", "ns", "-c", "cq"}, {"create", "lq", "other", "-n", "ns", "-c", "cq"}} {
		if _, errOut, code := jq(args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	for _, name := range []string{"w0", "w1"} {
		wl := strings.Replace(habitsWorkload(name, "a"), "memory: 12Gi", "memory: 1Gi", 1)
		if _, errOut, code := runWithStdin(server, wl, "submit", "-f", "-"); code != 0 {
			t.Fatalf("submit: %s", errOut)
		}
	}
	// o0 is Kueue's own export: admitted there, with status.
	exported, err := os.ReadFile("../../libs/api/testdata/exported-workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o0 := strings.NewReplacer("name: job-sample-job-x7k2p-3f1a2", "name: o0", "namespace: default", "namespace: ns",
		"queueName: user-queue", "queueName: other", "count: 3\n    name: main", "count: 1\n    name: main", "memory: 200Mi", "memory: 1Gi").Replace(string(exported))
	if !strings.Contains(o0, "\nstatus:\n  admission:") {
		t.Fatal("the exported workload lost its status")
	}
	if out, errOut, code := runWithStdin(server, o0, "submit", "-f", "-"); code != 0 {
		t.Fatalf("submit the exported workload: %s %s", out, errOut)
	}
	sync()
	states := func() string {
		t.Helper()
		out, _, _ := jq("get", "wl", "-n", "ns", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.status.conditions[?(@.type=="Admitted")].status}:{.status.conditions[?(@.type=="Evicted")].reason} {end}`)
		return out
	}
	want("admitted before stop", states(), "o0:True: w0:True: w1:True: ")
	out, _, _ := jq("stop", "localqueue", "lq", "-n", "ns")
	want("stop lq", out, "localqueue.kueue.x-k8s.io/lq stopped\n")
	sync()
	want("HoldAndDrain evicts lq's admitted only", states(), "o0:True: w0:False:LocalQueueStopped w1:False:LocalQueueStopped ")
	out, _, _ = jq("get", "lq", "lq", "-n", "ns", "-o", `jsonpath={.spec.stopPolicy} {.status.conditions[?(@.type=="Active")].status} {.status.conditions[?(@.type=="Active")].reason} {.status.conditions[?(@.type=="Active")].message}`)
	want("stopped LocalQueue", out, "HoldAndDrain False Stopped LocalQueue is stopped")
	out, _, _ = jq("get", "lq", "other", "-n", "ns", "-o", `jsonpath={.status.conditions[?(@.type=="Active")].reason}`)
	want("the other LocalQueue", out, "Ready")
	out, _, _ = jq("get", "wl", "w0", "-n", "ns", "-o", `jsonpath={.status.conditions[?(@.type=="Evicted")].message}|{.status.conditions[?(@.type=="QuotaReserved")].status}`)
	want("w0 evicted", out, "The LocalQueue is stopped|False")
	out, _, _ = jq("resume", "lq", "ns/lq")
	want("resume lq", out, "localqueue.kueue.x-k8s.io/lq resumed\n")
	sync()
	want("admitted again after resume", states(), "o0:True: w0:True:LocalQueueStopped w1:True:LocalQueueStopped ")
	out, _, _ = jq("stop", "lq", "lq", "-n", "ns", "--keep-already-running")
	want("stop --keep-already-running", out, "localqueue.kueue.x-k8s.io/lq stopped\n")
	wl := strings.Replace(habitsWorkload("w2", "a"), "memory: 12Gi", "memory: 1Gi", 1)
	if _, errOut, code := runWithStdin(server, wl, "submit", "-f", "-"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	sync()
	want("Hold keeps the admitted, holds the new", states(), "o0:True: w0:True:LocalQueueStopped w1:True:LocalQueueStopped w2:: ")
	out, _, _ = jq("get", "wl", "w2", "-n", "ns", "-o", `jsonpath={.status.conditions[?(@.type=="QuotaReserved")].reason}: {.status.conditions[?(@.type=="QuotaReserved")].message}`)
	want("w2 held", out, "Inadmissible: LocalQueue lq is stopped")
	if _, errOut, code := jq("stop", "lq", "nope", "-n", "ns"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("stop an unknown LocalQueue: exit %d %s", code, errOut)
	}
}
