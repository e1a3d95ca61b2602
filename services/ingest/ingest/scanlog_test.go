package ingest

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
)

// TestScanLogHandsEveryEventInOrder: scanLog, which reads ahead on a
// goroutine of its own, hands every event from and to the sequences asked,
// in order, across several read batches, an undecodable one as a
// placeholder; and stops where each says.
func TestScanLogHandsEveryEventInOrder(t *testing.T) {
	f := newFrontDoor(t)
	log := etaLog(t, 900, 3)
	if len(log) < 2500 {
		t.Fatalf("the log has %d events: too few to span three read batches", len(log))
	}
	bad := uint64(1500)
	for i, r := range log {
		if uint64(i+1) == bad {
			m := nats.NewMsg(events.WorkloadSubject("ns", "broken"))
			m.Header.Set(events.HeaderType, string(events.WorkloadSubmitted))
			m.Data = []byte("{not json")
			if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, _, err := bus.Publish(t.Context(), f.js, r.Event, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := uint64(len(log))
	scan := func(from, last, stopAt uint64) []uint64 {
		t.Helper()
		var seqs []uint64
		err := f.scanLog(t.Context(), from, last, func(r history.Record) bool {
			seqs = append(seqs, r.Seq)
			if r.Seq == bad && r.Event.ID != "undecodable" {
				t.Errorf("event %d handed as %q, want the undecodable placeholder", r.Seq, r.Event.ID)
			}
			return r.Seq != stopAt
		})
		if err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	want := func(from, to uint64) string {
		var s []uint64
		for q := from; q <= to; q++ {
			s = append(s, q)
		}
		return fmt.Sprint(s)
	}
	for _, c := range []struct{ from, last, stopAt, to uint64 }{
		{1, n, 0, n},
		{777, 2222, 0, 2222},
		{1, n, 1203, 1203},
		{n, n, 0, n},
	} {
		if got := fmt.Sprint(scan(c.from, c.last, c.stopAt)); got != want(c.from, c.to) {
			t.Errorf("scanLog(%d, %d) stopping at %d: handed %d events, want %d to %d in order", c.from, c.last, c.stopAt,
				len(scan(c.from, c.last, c.stopAt)), c.from, c.to)
		}
	}
}
