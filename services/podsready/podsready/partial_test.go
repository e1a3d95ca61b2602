package podsready

import (
	"testing"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// TestPartialSnapshotServesOnlyADormantReplica: a snapshot written while
// events were passed over unread (waitForPodsReady off) restores a replica
// that stays dormant and must rebuild once waitForPodsReady turns on, and
// is refused by a replica that reads every event: restoring it there would
// lose the workloads whose events it never read.
func TestPartialSnapshotServesOnlyADormantReplica(t *testing.T) {
	writer := &Service{}
	writer.reset()
	writer.dormant = 3
	payload, err := writer.encodeState()
	if err != nil {
		t.Fatal(err)
	}
	sn := &snapshot.Snapshot{Seq: 10, Payload: payload}

	full := &Service{full: true}
	full.reset()
	if err := full.restoreState(sn); err == nil {
		t.Errorf("a replica reading every event restored a partial snapshot")
	}
	if full.last != 0 {
		t.Errorf("the refused snapshot moved the replica to %d", full.last)
	}

	dormant := &Service{}
	dormant.reset()
	if err := dormant.restoreState(sn); err != nil {
		t.Fatalf("a dormant replica refused a partial snapshot: %v", err)
	}
	if dormant.last != 10 || dormant.dormant == 0 {
		t.Errorf("restored at %d with dormant %d; want 10 and a rebuild due when waitForPodsReady turns on", dormant.last, dormant.dormant)
	}

	// A whole snapshot serves both.
	whole := &Service{}
	whole.reset()
	whole.eng = engine.New()
	payload, err = whole.encodeState()
	if err != nil {
		t.Fatal(err)
	}
	full2 := &Service{full: true}
	full2.reset()
	if err := full2.restoreState(&snapshot.Snapshot{Seq: 7, Payload: payload}); err != nil || full2.last != 7 {
		t.Errorf("a whole snapshot: err %v, at %d", err, full2.last)
	}
}
