package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatchEndsOnErrorEvent: a watch the server ends with an ERROR event
// (its object a metav1.Status: 410 Expired when the watcher fell too far
// behind) ends `get -w`, `get --watch-only` and `watch` as kubectl does:
// the Status's message on stderr, a non-zero exit, and no row for the
// Status on stdout.
func TestWatchEndsOnErrorEvent(t *testing.T) {
	const added = `{"type":"ADDED","object":{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w0","namespace":"ns","resourceVersion":"3"},"spec":{"queueName":"lq"}}}`
	const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Expired","code":410,"message":"the watch fell more than 256 events behind; watch again from the last resourceVersion seen"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/workloads") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			io.WriteString(w, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"WorkloadList","metadata":{"resourceVersion":"2"},"items":[]}`)
			return
		}
		io.WriteString(w, added+"\n"+expired+"\n")
	}))
	t.Cleanup(srv.Close)
	t.Setenv("JQCTL_CONFIG", filepath.Join(t.TempDir(), "none"))
	for _, args := range [][]string{{"get", "wl", "-A", "-w"}, {"get", "wl", "-n", "ns", "--watch-only", "-o", "name"}, {"watch"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{args[0], "--server", srv.URL}, args[1:]...), &stdout, &stderr)
			if code == 0 {
				t.Errorf("exit 0, want non-zero")
			}
			if want := "410: Expired: the watch fell more than 256 events behind"; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), want)
			}
			rows := 0
			for line := range strings.Lines(stdout.String()) {
				switch {
				case strings.Contains(line, "w0"):
					rows++
				case !strings.HasPrefix(line, "NAMESPACE"):
					t.Errorf("a row that is not the workload's: %q", line)
				}
			}
			if rows != 1 {
				t.Errorf("stdout has %d rows of w0, want 1:\n%s", rows, stdout.String())
			}
		})
	}
}
