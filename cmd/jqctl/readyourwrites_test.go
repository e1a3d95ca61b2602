package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadYourWritesAcrossServers: a sequence jqctl remembers from
// another server (jqctl dev restarted on a fresh stream) is beyond the
// stream's end; `get` of a Kueue object (a /apis/ read, whose refusal is a
// metav1.Status) forgets it and answers, rather than 400 until the new
// stream passes it. Then `submit` and `get`, with no /v1/sync between
// them, show the submission: the get waits for the write's sequence.
func TestReadYourWritesAcrossServers(t *testing.T) {
	server := startStack(t)
	config := filepath.Join(t.TempDir(), "config")
	t.Setenv("JQCTL_CONFIG", config)
	stale := fmt.Sprintf(`{%q:1000000000}`, server)
	if err := os.WriteFile(config+".seq", []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	jq := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		root := newRoot(&stdout, &stderr)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(append([]string{args[0], "--server", server}, args[1:]...))
		if err := root.Execute(); err != nil {
			return stdout.String(), stderr.String() + err.Error(), 1
		}
		return stdout.String(), stderr.String(), 0
	}
	if out, errOut, code := jq("", "get", "cq", "-o", "name"); code != 0 {
		t.Fatalf("get with a stale remembered sequence: exit %d %s %s", code, out, errOut)
	}
	if seq := (&client{server: server, seqFile: config + ".seq"}).lastSeq(); seq != 0 {
		t.Errorf("the stale sequence is still remembered: %d", seq)
	}
	if _, errOut, code := jq(habitsConfig, "apply", "-n", "ns", "-f", "-"); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	for i := range 4 {
		name := fmt.Sprint("w", i)
		if _, errOut, code := jq(habitsWorkload(name, "a"), "submit", "-f", "-"); code != 0 {
			t.Fatalf("submit %s: %s", name, errOut)
		}
		out, errOut, code := jq("", "get", "wl", "-n", "ns", "-o", "name")
		if code != 0 || !strings.Contains(out, "/"+name+"\n") {
			t.Errorf("get right after submitting %s: exit %d %q %s", name, code, out, errOut)
		}
	}
	if seq := (&client{server: server, seqFile: config + ".seq"}).lastSeq(); seq == 0 {
		t.Error("no write's sequence is remembered")
	}
}
