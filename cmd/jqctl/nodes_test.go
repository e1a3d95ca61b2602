package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scoring"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestNodesPut runs `jqctl nodes put` against an embedded nats-server, in
// order (each step sees the bucket the previous one left), pinning its
// output with golden files and the bucket's content with the scorer's
// decoder.
func TestNodesPut(t *testing.T) {
	srv := testenv.NATS(t)
	url := srv.ClientURL()
	steps := []struct {
		golden string
		args   []string
		code   int
	}{
		{"put", []string{"nodes", "put", "-f", "testdata/nodes.yaml"}, 0},
		{"put-again", []string{"nodes", "put", "-f", "testdata/nodes-update.json"}, 0},
		{"put-invalid", []string{"nodes", "put", "-f", "testdata/nodes-invalid.yaml"}, 2},
		{"put-duplicate", []string{"nodes", "put", "-f", "testdata/nodes-duplicate.yaml"}, 2},
		{"put-no-file", []string{"nodes", "put"}, 2},
	}
	for _, st := range steps {
		t.Run(st.golden, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append(st.args, "--nats-url", url), &stdout, &stderr)
			if code != st.code {
				t.Errorf("exit %d, want %d; stderr %s", code, st.code, stderr.String())
			}
			checkGolden(t, filepath.Join("testdata", "nodes-"+st.golden+".golden"), stdout.String(), strings.ReplaceAll(stderr.String(), url, "NATS"))
		})
	}

	// The bucket holds the last good file, keyed by token, in the form the
	// scorer decodes; nothing of the invalid files was written.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, nodesBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]scoring.Node{}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		s, err := scoring.DecodeNodeState(e.Value())
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if k != events.Token(s.Name) {
			t.Errorf("node %s under key %s, want %s", s.Name, k, events.Token(s.Name))
		}
		got[s.Name] = s.Node()
	}
	want := map[string]scoring.Node{}
	for _, f := range []string{"testdata/nodes.yaml", "testdata/nodes-update.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := parseNodeStates(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			want[n.Name] = n.Node()
		}
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("bucket (-want +got):\n%s", d)
	}
	if g := got["gpu-2"].Requested["nvidia.com/gpu"]; g != 2 {
		t.Errorf("gpu-2 requested %d GPUs, want the update's 2", g)
	}
}
