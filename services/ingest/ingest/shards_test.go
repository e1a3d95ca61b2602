package ingest

import (
	"net/http"
	"testing"

	"github.com/jetqueue/jetqueue/libs/bus"
)

// TestBlockAdmissionRefusedWithShards: with admission recorded as two
// shards, a Configuration turning on waitForPodsReady.blockAdmission
// (explicitly or by default) is refused with 422 on that field, since
// sharded admission would decide nothing under it; with it off, or with
// one shard, the same Configuration applies.
func TestBlockAdmissionRefusedWithShards(t *testing.T) {
	f := newFrontDoor(t)
	conf := func(block string) string {
		return `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {enable: true` + block + `}
`
	}
	yaml := map[string]string{"Content-Type": "application/yaml"}
	if code, _, body := f.do(t, "POST", "/v1/apply", yaml, conf("")); code != http.StatusOK {
		t.Fatalf("one shard: %d %s, want 200", code, body)
	}
	if err := bus.RecordShardCount(t.Context(), f.js, "admission", 2); err != nil {
		t.Fatal(err)
	}
	for _, block := range []string{"", ", blockAdmission: true"} {
		code, _, body := f.do(t, "POST", "/v1/apply", yaml, conf(block))
		if code != http.StatusUnprocessableEntity || fieldOf(t, body) != "waitForPodsReady.blockAdmission" {
			t.Errorf("two shards, %q: %d %s, want 422 on waitForPodsReady.blockAdmission", block, code, body)
		}
	}
	if code, _, body := f.do(t, "POST", "/v1/apply", yaml, conf(", blockAdmission: false")); code != http.StatusOK {
		t.Errorf("two shards, blockAdmission false: %d %s, want 200", code, body)
	}
}
