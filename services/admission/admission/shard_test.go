package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// TestHandoverSurvivesSnapshot: a move between shards' trees opens a
// handover in the fold; a snapshot taken before its release restores it,
// so a restarted shard still holds the receiving tree (and the old owner
// still owes the release) until the release is read.
func TestHandoverSurvivesSnapshot(t *testing.T) {
	// Two cohorts of different owners.
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		name := "team-" + string(rune('a'+i))
		if engine.TreeOwner(name, "", 2) == 0 && a == "" {
			a = name
		} else if engine.TreeOwner(name, "", 2) == 1 && b == "" {
			b = name
		}
	}
	newShard := func(i int) *Service {
		s := &Service{log: zap.NewNop(), m: metrics.NewAdmission(nil), shard: i, shards: 2}
		s.reset()
		return s
	}
	cq := func(cohort string) events.Event {
		obj := []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"mover"},"spec":{"cohort":"` + cohort +
			`","namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"3"}]}]}]}}`)
		objs, err := api.Decode(obj)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(objs[0])
		if err != nil {
			t.Fatal(err)
		}
		return events.Event{Type: events.ConfigApplied, Data: &events.ConfigAppliedData{
			ConfigRef: events.ConfigRef{Kind: "ClusterQueue", Name: "mover"}, Object: raw}}
	}
	s1 := newShard(1)
	for seq, ev := range []events.Event{cq(a), cq(b)} {
		if err := s1.apply(ev); err != nil {
			t.Fatal(err)
		}
		s1.noteTree(ev, uint64(seq+1))
	}
	want := []events.ShardReleasedData{{ClusterQueue: "mover", From: "cohort/" + a, To: "cohort/" + b, FromShard: 0, ToShard: 1, AtSeq: 2}}
	if d := cmp.Diff(want, s1.handovers); d != "" {
		t.Fatalf("handovers (-want +got):\n%s", d)
	}
	if s1.eng.Owns("mover") {
		t.Fatal("shard 1 decides mover before its release")
	}
	payload, err := s1.encodeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	restored := newShard(1)
	if err := restored.restoreState(&snapshot.Snapshot{Seq: 2, Payload: payload}, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, restored.handovers); d != "" {
		t.Fatalf("restored handovers (-want +got):\n%s", d)
	}
	if restored.eng.Owns("mover") {
		t.Fatal("restored shard 1 decides mover before its release")
	}
	restored.released(&want[0])
	if !restored.eng.Owns("mover") || len(restored.handovers) != 0 {
		t.Fatalf("after the release: owns %v, handovers %v", restored.eng.Owns("mover"), restored.handovers)
	}
}
