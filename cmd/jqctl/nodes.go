package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// nodesBucket is the scorer's node bucket (services/scorer's NodesBucket;
// jqctl does not import the service, so the name is spelt twice).
const nodesBucket = events.NodesBucket

func newNodes(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Manage the node states the scorer reads when there is no Kubernetes (bucket " + nodesBucket + ")",
	}
	cmd.AddCommand(nodesPutCmd(stdout))
	return cmd
}

func nodesPutCmd(stdout io.Writer) *cobra.Command {
	var file, natsURL string
	cmd := &cobra.Command{
		Use:   "put -f FILE",
		Short: "Create or replace node states in the " + nodesBucket + " bucket",
		Long: `put reads node states (YAML or JSON: a list of nodes, {"nodes": [...]},
or one node) and writes each to the ` + nodesBucket + ` bucket, which the scorer
(--inventory=kv) watches. A node is
  {"name": "gpu-1", "labels": {"pool": "gpu"},
   "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
   "allocatable": {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": "8"},
   "requested": {"cpu": "16", "nvidia.com/gpu": "4"}}
with Kubernetes quantities; requested is what the node's pods already
request, cpu and memory including the 100m / 200Mi default of every
container without them. The whole file is checked before anything is
written; then each node prints created, updated or unchanged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			nodes, err := parseNodeStates(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return putNodes(cmd.Context(), natsURL, natsIdentity(cmd), nodes, stdout)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "node states, YAML or JSON (- for stdin)")
	cmd.Flags().StringVar(&natsURL, "nats-url", defaultNATSURL(), "NATS server URL (env JQ_NATS_URL)")
	addNATSIdentityFlags(cmd)
	return cmd
}

func defaultNATSURL() string {
	if s := os.Getenv("JQ_NATS_URL"); s != "" {
		return s
	}
	return "nats://127.0.0.1:4222"
}

// parseNodeStates decodes and checks every node, naming the field of the
// first problem.
func parseNodeStates(data []byte) ([]scoring.NodeState, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %v", err)
	}
	js = bytes.TrimSpace(js)
	var raw []json.RawMessage
	path := func(i int) string { return fmt.Sprintf("nodes[%d]", i) }
	switch {
	case bytes.HasPrefix(js, []byte("[")):
		err = json.Unmarshal(js, &raw)
		path = func(i int) string { return fmt.Sprintf("[%d]", i) }
	case bytes.HasPrefix(js, []byte("{")):
		var top map[string]json.RawMessage
		if err = json.Unmarshal(js, &top); err == nil {
			if list, ok := top["nodes"]; ok && len(top) == 1 {
				err = json.Unmarshal(list, &raw)
			} else {
				raw = []json.RawMessage{js}
				path = func(int) string { return "(top level)" }
			}
		}
	default:
		err = errors.New("want a node, a list of nodes or {nodes: [...]}")
	}
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, errors.New("no nodes")
	}
	out := make([]scoring.NodeState, len(raw))
	seen := map[string]int{}
	for i, r := range raw {
		s, err := scoring.DecodeNodeState(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path(i), err)
		}
		if j, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q already names %s", path(i), s.Name, path(j))
		}
		seen[s.Name] = i
		out[i] = s
	}
	return out, nil
}

// putNodes writes each node under events.Token(name), comparing with
// what is there so that an unchanged node is not rewritten.
func putNodes(ctx context.Context, url string, id bus.Identity, nodes []scoring.NodeState, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts, err := id.Options()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("jqctl"))...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, nodesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: nodesBucket,
			Description: "jetqueue node states for the scorer", History: 1})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, nodesBucket)
		}
	}
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", nodesBucket, err)
	}
	for _, n := range nodes {
		value, err := json.Marshal(n)
		if err != nil {
			return err
		}
		key := events.Token(n.Name)
		action := "created"
		cur, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, key, value)
		case err != nil:
		case bytes.Equal(cur.Value(), value):
			action = "unchanged"
		default:
			action = "updated"
			_, err = kv.Update(ctx, key, value, cur.Revision())
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		fmt.Fprintf(stdout, "node/%s %s\n", n.Name, action)
	}
	return nil
}
