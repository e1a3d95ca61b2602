package engine

import (
	"errors"
	"testing"
)

// TestPacedSnapshotIsTheSnapshot: a paced encode and decode (a background
// compaction's) give the same bytes and engine as unpaced ones, rest is
// called between every 256 workloads, and a rest's error stops either
// with that very error, not as a bad snapshot.
func TestPacedSnapshotIsTheSnapshot(t *testing.T) {
	const n = 1000 // 3 rests each in encoding, decoding and rebuilding
	e := loadedEngine(t, 6, 2, n, 7)
	e.RunToQuiescence(t0)
	e.DrainDecisions()
	admitted := 0
	for _, w := range e.Workloads() {
		if w.Status == Admitted {
			admitted++
		}
	}
	if admitted == 0 || admitted == n {
		t.Fatalf("%d of %d admitted: the snapshot must hold admitted and pending workloads", admitted, n)
	}
	want, err := e.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	rests := 0
	rest := func() error { rests++; return nil }
	got, err := e.EncodeSnapshotPaced(rest)
	if err != nil || string(got) != string(want) {
		t.Fatalf("paced encode differs from the unpaced one (%v)", err)
	}
	if rests != 3 {
		t.Fatalf("encoding %d workloads rested %d times, want 3", n, rests)
	}
	rests = 0
	back, err := DecodeSnapshotPaced(want, rest)
	if err != nil {
		t.Fatal(err)
	}
	if rests != 6 {
		t.Fatalf("decoding %d workloads rested %d times, want 6", n, rests)
	}
	if again, err := back.EncodeSnapshot(); err != nil || string(again) != string(want) {
		t.Fatalf("the paced decode is another engine (%v)", err)
	}

	stop := errors.New("stopped")
	for _, after := range []int{1, 3, 4, 6} {
		rests = 0
		stopAt := func() error {
			if rests++; rests == after {
				return stop
			}
			return nil
		}
		if after <= 3 {
			if _, err := e.EncodeSnapshotPaced(stopAt); err != stop {
				t.Fatalf("encode stopped at rest %d: %v, want the rest's error", after, err)
			}
			rests = 0
		}
		if _, err := DecodeSnapshotPaced(want, stopAt); err != stop || errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("decode stopped at rest %d: %v, want the rest's error", after, err)
		}
	}
}
