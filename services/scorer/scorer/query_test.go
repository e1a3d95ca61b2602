package scorer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

// scorerExample is SCORER.md's example body.
const scorerExample = `{
  "config": {
    "fitPlus": {"nvidia.com/gpu": {"type": "MostAllocated", "weight": 2},
                "cpu": {"type": "LeastAllocated", "weight": 1}},
    "scarce": ["nvidia.com/gpu"],
    "pluginWeights": {"NodeResourcesFitPlus": 1, "ScarceResourceAvoidance": 1}
  },
  "pod":   {"requests": {"cpu": "16", "nvidia.com/gpu": "2"},
            "containers": [{"requests": {"cpu": "16", "nvidia.com/gpu": "2"}}]},
  "nodes": [{"name": "n1", "allocatable": {"cpu": "96", "nvidia.com/gpu": "8"},
             "requested": {"cpu": "16", "nvidia.com/gpu": "4"}}],
  "expected": {"n1": {"fitPlus": 72, "scarce": 100, "total": 172}},
  "expectedOrder": ["n1"]
}`

func TestAnswer(t *testing.T) {
	def, err := scoring.New(gpuScoring)
	if err != nil {
		t.Fatal(err)
	}
	synced := NewInventory()
	synced.put("k1", scoring.Node{Name: "gpu-b", Allocatable: res("cpu", "32", "nvidia.com/gpu", "8")})
	synced.put("k2", scoring.Node{Name: "gpu-a", Allocatable: res("cpu", "32", "nvidia.com/gpu", "8"), Requested: res("nvidia.com/gpu", "4")})
	synced.markSynced()
	cases := []struct {
		name   string
		inv    *Inventory
		body   string
		status int
		want   string
	}{
		{"SCORER.md's example", synced, scorerExample, 200,
			`{"ranking":[{"node":"n1","fitPlus":72,"scarce":100,"total":172}]}`},
		{"YAML", synced, "pod: {requests: {cpu: 1}}\nnodes:\n- {name: b, allocatable: {cpu: 2}}\n- {name: a, allocatable: {cpu: 2}}\n", 200,
			`{"ranking":[{"node":"a","fitPlus":50,"scarce":100,"total":150},{"node":"b","fitPlus":50,"scarce":100,"total":150}]}`},
		// Without config: the service's (gpu Most 2, cpu Least 1); without
		// nodes: the inventory. gpu-a: gpu 6/8 → 75, cpu 1/32 → 96:
		// (150+96)/3 = 82; gpu-b: 2/8 → 25: (50+96)/3 = 48.
		{"the service's config and inventory", synced, `{"pod":{"requests":{"cpu":"1","nvidia.com/gpu":"2"}}}`, 200,
			`{"ranking":[{"node":"gpu-a","fitPlus":82,"scarce":100,"total":182},{"node":"gpu-b","fitPlus":48,"scarce":100,"total":148}]}`},
		{"no inventory yet", NewInventory(), `{"pod":{"requests":{"cpu":"1"}}}`, 503,
			`{"errors":[{"message":"node inventory not synced yet"}]}`},
		{"invalid config", synced, `{"config":{"fitPlus":{"cpu":{"type":"Most","weight":-1}}},"pod":{},"nodes":[]}`, 400,
			`{"errors":[{"field":"config.fitPlus[cpu].type","message":"unknown strategy \"Most\" (want MostAllocated or LeastAllocated)"},` +
				`{"field":"config.fitPlus[cpu].weight","message":"must not be negative, got -1"}]}`},
		{"config of the wrong shape", synced, `{"config":{"fitPlus":[]},"pod":{}}`, 400,
			`{"errors":[{"field":"config.fitPlus","message":"want an object"}]}`},
		{"weight not an integer", synced, `{"config":{"fitPlus":{"cpu":{"type":"MostAllocated","weight":1.5}}},"pod":{}}`, 400,
			`{"errors":[{"field":"config.fitPlus[cpu].weight","message":"want an integer, got number 1.5"}]}`},
		{"unknown config field", synced, `{"config":{"fitplus":{}},"pod":{}}`, 400,
			`{"errors":[{"field":"config.fitplus","message":"unknown field"}]}`},
		{"bad quantity", synced, `{"pod":{"requests":{"cpu":"many"}},"nodes":[]}`, 400,
			`{"errors":[{"field":"pod.requests[cpu]","message":"invalid quantity \"many\""}]}`},
		{"absurd exponent", synced, `{"pod":{"requests":{"cpu":"1e-99999999"}},"nodes":[]}`, 400,
			`{"errors":[{"field":"pod.requests[cpu]","message":"invalid quantity \"1e-99999999\": exponent out of range"}]}`},
		{"requests not an object", synced, `{"pod":{"requests":[]},"nodes":[]}`, 400,
			`{"errors":[{"field":"pod.requests","message":"want an object of resource name to quantity"}]}`},
		{"bad node", synced, `{"pod":{},"nodes":[{"name":"n","allocatable":{"cpu":"-1"}}]}`, 400,
			`{"errors":[{"field":"nodes[0].allocatable[cpu]","message":"must not be negative, got \"-1\""}]}`},
		{"duplicate node", synced, `{"pod":{},"nodes":[{"name":"n"},{"name":"n"}]}`, 400,
			`{"errors":[{"field":"nodes[1].name","message":"\"n\" already names nodes[0]"}]}`},
		{"unknown field", synced, `{"pod":{},"nodes":[],"node":[]}`, 400,
			`{"errors":[{"field":"node","message":"unknown field"}]}`},
		{"no pod", synced, `{"nodes":[]}`, 400, `{"errors":[{"field":"pod","message":"required"}]}`},
		{"not an object", synced, `[1]`, 400, `{"errors":[{"message":"want an object with pod and optionally config and nodes"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := (&Querier{Scorer: def, Inventory: tc.inv}).Answer([]byte(tc.body))
			if status != tc.status {
				t.Errorf("status %d, want %d", status, tc.status)
			}
			if d := cmp.Diff(tc.want, string(body)); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}

// TestAnswerVectors sends every conformance vector of the repository as a
// query and checks the answer against the vector's expectations, so the
// service decodes and ranks exactly as `jqctl score` does.
func TestAnswerVectors(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*/*.json", "*/*.yaml"} {
		m, _ := filepath.Glob(filepath.Join("..", "..", "..", "conformance", "scorer", pattern))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no vectors found under conformance/scorer")
	}
	def, _ := scoring.New(scoring.Config{})
	q := &Querier{Scorer: def, Inventory: NewInventory()}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			status, body := q.Answer(data)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var got struct{ Ranking []scoring.NodeScore }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			js, _ := yaml.YAMLToJSON(data)
			var want struct {
				Expected      map[string]struct{ FitPlus, Scarce, Total *int64 }
				ExpectedOrder []string
			}
			if err := json.Unmarshal(js, &want); err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, r := range got.Ranking {
				order = append(order, r.Node)
				e, ok := want.Expected[r.Node]
				if !ok {
					continue
				}
				for _, c := range []struct {
					what string
					want *int64
					got  int64
				}{{"fitPlus", e.FitPlus, r.FitPlus}, {"scarce", e.Scarce, r.Scarce}, {"total", e.Total, r.Total}} {
					if c.want != nil && *c.want != c.got {
						t.Errorf("%s.%s = %d, want %d", r.Node, c.what, c.got, *c.want)
					}
				}
			}
			if want.ExpectedOrder != nil && !slices.Equal(order, want.ExpectedOrder) {
				t.Errorf("order %v, want %v", order, want.ExpectedOrder)
			}
		})
	}
}
