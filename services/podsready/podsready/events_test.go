package podsready

import (
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	podsreadycore "github.com/jetqueue/jetqueue/libs/podsready"
)

// TestEventsCarryOutEachTimer pins what each kind of timer publishes: a
// timeout evicts with KEP-349's requeue state, a spent backoff limit
// evicts as InactiveWorkload and deactivates, and a finished backoff
// requeues. Ids derive from the workload and the instant, so a second
// leader firing the same timer is deduplicated.
func TestEventsCarryOutEachTimer(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	requeueAt := at.Add(10 * time.Second)
	for _, tc := range []struct {
		name  string
		timer engine.Timer
		want  []string // type and reason
	}{
		{"timeout", engine.Timer{Key: "ns/w", At: at, Timeout: &podsreadycore.Timeout{Count: 1, RequeueAt: requeueAt}},
			[]string{string(events.Evicted) + " " + engine.EvictedByPodsReadyTimeout}},
		{"deactivation", engine.Timer{Key: "ns/w", At: at, Timeout: &podsreadycore.Timeout{Deactivate: true}},
			[]string{string(events.Evicted) + " " + engine.EvictedByDeactivation, string(events.Deactivated)}},
		{"backoff over", engine.Timer{Key: "ns/w", At: requeueAt, RequeueCount: 1},
			[]string{string(events.Requeued)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Events(tc.timer, tc.timer.At)
			var got []string
			for _, ev := range out {
				s := string(ev.Type)
				if d, ok := ev.Data.(*events.EvictedData); ok {
					s += " " + d.Reason
					if d.Reason == engine.EvictedByPodsReadyTimeout && (d.RequeueCount != 1 || d.RequeueAt == nil || !d.RequeueAt.Equal(requeueAt)) {
						t.Errorf("requeue state %d %v, want 1 at %v", d.RequeueCount, d.RequeueAt, requeueAt)
					}
				}
				if d, ok := ev.Data.(*events.RequeuedData); ok && (d.Count != 1 || !d.Until.Equal(requeueAt)) {
					t.Errorf("requeued %+v, want count 1 until %v", d, requeueAt)
				}
				// Deciders apply a decision only from its owner: every
				// event a timer publishes must be podsready's to publish.
				if err := events.CheckSource(ev); err != nil || ev.Source != events.SourcePodsReady {
					t.Errorf("%s from %q: %v", ev.Type, ev.Source, err)
				}
				if ev.Subject != events.WorkloadSubject("ns", "w") || !ev.Time.Equal(tc.timer.At) {
					t.Errorf("%s on %s at %v", ev.Type, ev.Subject, ev.Time)
				}
				got = append(got, s)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("events %v, want %v", got, tc.want)
				}
			}
			again := Events(tc.timer, tc.timer.At)
			if again[0].ID != out[0].ID || (len(out) > 1 && out[0].ID == out[1].ID) {
				t.Errorf("ids %s, %s: want stable per timer and distinct per event", out[0].ID, again[0].ID)
			}
		})
	}
}
