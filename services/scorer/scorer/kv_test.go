package scorer

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/scoring"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// natsJS starts an embedded nats-server and returns its URL and a
// JetStream context on it.
func natsJS(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	srv := testenv.NATS(t)
	nc, err := bus.Connect(srv.ClientURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), js
}

func putNode(t *testing.T, kv jetstream.KeyValue, name, value string) {
	t.Helper()
	if _, err := kv.Put(context.Background(), NodeKey(name), []byte(value)); err != nil {
		t.Fatal(err)
	}
}

// TestKVInventory drives the bucket path: states present at start, put,
// updated, malformed and deleted.
func TestKVInventory(t *testing.T) {
	_, js := natsJS(t)
	ctx := context.Background()
	kv, err := NodesKV(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	putNode(t, kv, "gpu-1", `{"name":"gpu-1","labels":{"pool":"gpu"},
		"taints":[{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}],
		"allocatable":{"cpu":"96","memory":"512Gi","nvidia.com/gpu":"8"},"requested":{"cpu":"16","nvidia.com/gpu":4}}`)

	inv := NewInventory()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runKV(rctx, kv, inv, zap.NewNop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitSynced(t, inv)
	gpu1 := scoring.Node{Name: "gpu-1", Labels: map[string]string{"pool": "gpu"},
		Taints:      []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
		Allocatable: res("cpu", "96", "memory", "512Gi", "nvidia.com/gpu", "8"), Requested: res("cpu", "16", "nvidia.com/gpu", "4")}
	waitNodes(t, inv, []scoring.Node{gpu1})

	t.Run("put", func(t *testing.T) {
		putNode(t, kv, "cpu.1", `{"name":"cpu.1","allocatable":{"cpu":"32","memory":"64Gi"}}`)
		waitNodes(t, inv, []scoring.Node{{Name: "cpu.1", Allocatable: res("cpu", "32", "memory", "64Gi")}, gpu1})
	})
	t.Run("update", func(t *testing.T) {
		putNode(t, kv, "cpu.1", `{"name":"cpu.1","allocatable":{"cpu":"32","memory":"64Gi"},"requested":{"cpu":"1500m","memory":"200Mi"}}`)
		waitNodes(t, inv, []scoring.Node{{Name: "cpu.1", Allocatable: res("cpu", "32", "memory", "64Gi"),
			Requested: res("cpu", "1500m", "memory", "200Mi")}, gpu1})
	})
	t.Run("a malformed state drops the node", func(t *testing.T) {
		putNode(t, kv, "cpu.1", `{"name":"cpu.1","allocatable":{"cpu":"lots"}}`)
		waitNodes(t, inv, []scoring.Node{gpu1})
	})
	t.Run("delete", func(t *testing.T) {
		putNode(t, kv, "cpu.1", `{"name":"cpu.1","allocatable":{"cpu":"32"}}`)
		waitNodes(t, inv, []scoring.Node{{Name: "cpu.1", Allocatable: res("cpu", "32")}, gpu1})
		if err := kv.Delete(ctx, NodeKey("gpu-1")); err != nil {
			t.Fatal(err)
		}
		waitNodes(t, inv, []scoring.Node{{Name: "cpu.1", Allocatable: res("cpu", "32")}})
	})
	t.Run("purge", func(t *testing.T) {
		if err := kv.Purge(ctx, NodeKey("cpu.1")); err != nil {
			t.Fatal(err)
		}
		waitNodes(t, inv, []scoring.Node{})
	})
}

// TestDecodeNodeState pins the bucket's value format and its errors.
func TestDecodeNodeState(t *testing.T) {
	cases := []struct {
		name, in, err string
	}{
		{"minimal", `{"name":"n"}`, ""},
		{"bare numbers", `{"name":"n","allocatable":{"nvidia.com/gpu":8}}`, ""},
		{"no name", `{"allocatable":{"cpu":"1"}}`, "name: required"},
		{"unknown field", `{"name":"n","capacity":{}}`, `json: unknown field "capacity"`},
		{"bad quantity", `{"name":"n","allocatable":{"cpu":"lots"}}`, `allocatable[cpu]: invalid quantity "lots"`},
		{"negative", `{"name":"n","requested":{"memory":"-1Gi"}}`, `requested[memory]: must not be negative, got "-1Gi"`},
		{"absurd exponent", `{"name":"n","requested":{"cpu":"1e-99999999"}}`, `requested[cpu]: invalid quantity "1e-99999999": exponent out of range`},
		{"not an object", `{"name":"n","requested":["cpu"]}`, `requested: want an object of resource name to quantity`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scoring.DecodeNodeState([]byte(tc.in))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.err {
				t.Errorf("error %q, want %q", got, tc.err)
			}
		})
	}
}

// TestKVInventoryEmptyBucket: an empty bucket is a synced, empty inventory.
func TestKVInventoryEmptyBucket(t *testing.T) {
	_, js := natsJS(t)
	kv, err := NodesKV(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runKV(ctx, kv, inv, zap.NewNop()) }()
	waitSynced(t, inv)
	if n := inv.Nodes(); len(n) != 0 {
		t.Errorf("nodes %v, want none", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
