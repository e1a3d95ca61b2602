package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kueueHabitsStack is TestKubectlHabits' world: cq of 2 cpu, LocalQueue
// ns/lq, w0 and w1 admitted, w2 pending. It returns a runner of jqctl.
func kueueHabitsStack(t *testing.T) func(args ...string) (string, string, int) {
	server := startStack(t)
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	jq := func(args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append([]string{args[0], "--server", server}, args[1:]...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	apply := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"submit", "-f", p}
		if name == "config.yaml" {
			args = []string{"apply", "-n", "ns", "-f", p}
		}
		if _, errOut, code := jq(args...); code != 0 {
			t.Fatalf("%s: %s", strings.Join(args, " "), errOut)
		}
	}
	apply("config.yaml", habitsConfig)
	for i := range 3 {
		apply(fmt.Sprintf("w%d.yaml", i), habitsWorkload(fmt.Sprint("w", i), "a"))
	}
	resp, err := http.Get(server + "/v1/sync?timeout=30s")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sync: %v %v", err, resp)
	}
	resp.Body.Close()
	return jq
}

// TestDescribeOutputIsTheKueueObject: describe -o json|yaml of a Workload
// prints the Kueue Workload object (status.conditions included) exactly
// as get -o json|yaml does, however the workload is named; describe's
// text stays jetqueue's view with the event history.
func TestDescribeOutputIsTheKueueObject(t *testing.T) {
	jq := kueueHabitsStack(t)
	for _, name := range []string{"w0", "w2"} {
		for _, format := range []string{"json", "yaml"} {
			get, errOut, code := jq("get", "wl", name, "-n", "ns", "-o", format)
			if code != 0 {
				t.Fatalf("get wl %s -o %s: %s", name, format, errOut)
			}
			if !strings.Contains(get, "Workload") || !strings.Contains(get, "conditions") {
				t.Fatalf("get wl %s -o %s is not a Kueue Workload:\n%s", name, format, get)
			}
			for _, args := range [][]string{
				{"describe", "ns/" + name, "-o", format},
				{"describe", "wl", name, "-n", "ns", "-o", format},
				{"describe", "workload", "ns/" + name, "-o", format},
			} {
				out, errOut, code := jq(args...)
				if code != 0 || out != get {
					t.Errorf("%s: exit %d %s\n got %q\nwant %q (get -o %s)", strings.Join(args, " "), code, errOut, out, get, format)
				}
			}
		}
	}
	out, _, _ := jq("describe", "ns/w2")
	if !strings.Contains(out, "Name:          ns/w2\n") || !strings.Contains(out, "Status:        pending\n") || !strings.Contains(out, "Events:\n") {
		t.Errorf("describe ns/w2 text:\n%s", out)
	}
}

// TestListWorkloadStatusAsKueuectl: list workload --status takes
// kueuectl's values, case-insensitively: all lists every workload,
// quotareserved those reserved but not yet admitted (none here: without
// admission checks a reservation is an admission, as in Kueue), and an
// unknown value is refused with the values it may be.
func TestListWorkloadStatusAsKueuectl(t *testing.T) {
	jq := kueueHabitsStack(t)
	for _, tc := range []struct{ status, want string }{
		{"all", "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\nworkload.kueue.x-k8s.io/w2\n"},
		{"All", "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\nworkload.kueue.x-k8s.io/w2\n"},
		{"pending", "workload.kueue.x-k8s.io/w2\n"},
		{"Admitted", "workload.kueue.x-k8s.io/w0\nworkload.kueue.x-k8s.io/w1\n"},
		{"quotareserved", ""},
		{"finished", ""},
	} {
		out, errOut, code := jq("list", "workload", "-n", "ns", "--status", tc.status, "-o", "name")
		if code != 0 || out != tc.want {
			t.Errorf("list workload --status %s: exit %d %s\n got %q\nwant %q", tc.status, code, errOut, out, tc.want)
		}
	}
	_, errOut, code := jq("list", "workload", "-n", "ns", "--status", "running")
	if code == 0 || !strings.Contains(errOut, `invalid status value (running). Must be "all", "pending", "quotareserved", "admitted", "finished"`) {
		t.Errorf("list workload --status running: exit %d, %s", code, errOut)
	}
}

// TestQuotaReservedNotAdmitted is Kueue's workload.Status for
// quotareserved, over the conditions a Workload can carry.
func TestQuotaReservedNotAdmitted(t *testing.T) {
	wl := func(conds ...string) *unstructured.Unstructured {
		var cs []any
		for _, c := range conds {
			typ, status, _ := strings.Cut(c, "=")
			cs = append(cs, map[string]any{"type": typ, "status": status, "reason": "R", "message": "",
				"lastTransitionTime": "2026-01-01T00:00:00Z"})
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": cs}}}
	}
	for _, tc := range []struct {
		conds []string
		want  bool
	}{
		{nil, false},
		{[]string{"QuotaReserved=False"}, false},
		{[]string{"QuotaReserved=True"}, true},
		{[]string{"QuotaReserved=True", "Admitted=False"}, true},
		{[]string{"QuotaReserved=True", "Admitted=True"}, false},
		{[]string{"QuotaReserved=True", "Finished=True"}, false},
	} {
		if got := quotaReservedNotAdmitted(wl(tc.conds...)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.conds, got, tc.want)
		}
	}
}
