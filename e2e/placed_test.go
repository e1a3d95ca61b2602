package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

// TestAdmittedWorkloadIsPlacedOnRealNodes runs the scorer next to ingest
// and admission, with nodes in the JQ_NODES bucket: an admitted workload
// gets a Placed event that names those nodes, best first.
func TestAdmittedWorkloadIsPlacedOnRealNodes(t *testing.T) {
	s := start(t)
	nc, err := bus.Connect(s.nats, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := scorer.NodesKV(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for name, state := range map[string]string{
		"node-busy": `{"name":"node-busy","allocatable":{"cpu":"8"},"requested":{"cpu":"6"}}`,
		"node-idle": `{"name":"node-idle","allocatable":{"cpu":"8"},"requested":{"cpu":"0"}}`,
	} {
		if _, err := kv.Put(ctx, scorer.NodeKey(name), []byte(state)); err != nil {
			t.Fatal(err)
		}
	}
	s.run("scorer", func(ctx context.Context, rt *service.Runtime) error {
		return scorer.Run(ctx, rt, scorer.Config{NATSURL: s.nats, Instance: "e2e", Inventory: scorer.InventoryKV})
	})
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("10")))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.sync()
		var detail struct {
			Status string `json:"status"`
			Events []struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"events"`
		}
		s.call("GET", "/v1/workloads/ns/w", nil, &detail)
		for _, e := range detail.Events {
			if e.Type != "io.jetqueue.workload.placed.v1" {
				continue
			}
			var placed struct {
				PodSets []struct {
					Name  string `json:"name"`
					Nodes []struct {
						Node string `json:"node"`
					} `json:"nodes"`
				} `json:"podSets"`
			}
			if err := json.Unmarshal(e.Data, &placed); err != nil {
				t.Fatal(err)
			}
			if len(placed.PodSets) != 1 || len(placed.PodSets[0].Nodes) != 1 || placed.PodSets[0].Nodes[0].Node == "" {
				t.Fatalf("placement %s", e.Data)
			}
			// The default config scores cpu LeastAllocated: the idle node
			// (7 of 8 cpu left) beats the busy one (1 of 8).
			if got := placed.PodSets[0].Nodes[0].Node; got != "node-idle" {
				t.Fatalf("placed on %q, want node-idle", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Placed event for an admitted workload (status %s, %d events)", detail.Status, len(detail.Events))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
