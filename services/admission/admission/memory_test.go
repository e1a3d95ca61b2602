package admission

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/metrics"
)

// TestSubjectPositionsForgetEndedWorkloads: admission keeps the position
// of live workloads' subjects only (what its decisions are fenced at),
// not of placement or batch subjects, and forgets a
// workload's once it is deleted or expires.
func TestSubjectPositionsForgetEndedWorkloads(t *testing.T) {
	s := &Service{m: metrics.NewAdmission(nil), eng: engine.New(), onSubj: map[string]uint64{}, mine: map[string]bool{}, awaiting: map[string]bool{},
		chain: map[string]uint64{}, open: map[string]*openBatch{}, waiting: map[string]string{}}
	ref := func(name string) events.WorkloadRef { return events.WorkloadRef{Namespace: "team", Name: name} }
	seq := uint64(0)
	feed := func(typ events.Type, subject string, data any) {
		t.Helper()
		seq++
		ev := events.Event{ID: "e" + string(rune('a'+seq)), Type: typ, Source: "test", Time: t0, Subject: subject, Data: data}.FromOwner()
		if err := s.process(read{seq: seq, subject: subject, ev: ev}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b"} {
		wl, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": n, "namespace": "team"}, "spec": map[string]any{"queueName": "lq"}})
		feed(events.WorkloadSubmitted, events.WorkloadSubject("team", n), &events.WorkloadSubmittedData{WorkloadRef: ref(n), Workload: wl, CreatedAt: t0})
	}
	feed(events.Placed, events.PlacedSubject("team", "a"), &events.PlacedData{WorkloadRef: ref("a")})
	feed(events.BatchClosed, events.BatchSubject, &events.BatchClosedData{Batch: "x", Missing: 1})
	feed(events.WorkloadFinished, events.WorkloadSubject("team", "b"), &events.WorkloadFinishedData{WorkloadRef: ref("b")})
	want := []string{events.WorkloadSubject("team", "a"), events.WorkloadSubject("team", "b")}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(s.onSubj)); !slices.Equal(got, want) {
		t.Errorf("positions kept %v, want the two workloads' subjects %v", got, want)
	}
	feed(events.WorkloadDeleted, events.WorkloadSubject("team", "a"), &events.WorkloadRef{Namespace: "team", Name: "a"})
	feed(events.WorkloadExpired, events.WorkloadSubject("team", "b"), &events.WorkloadRef{Namespace: "team", Name: "b"})
	if len(s.onSubj) != 0 || len(s.eng.Workloads()) != 0 {
		t.Errorf("after both ended: positions %v, engine workloads %d; want none", s.onSubj, len(s.eng.Workloads()))
	}
}
