package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAStartedConsumerHasAMark: a consumer is marked at 0 as soon as it
// starts, so /v1/sync waits for it before its first batch (the preemptor's
// first eviction was missed this way under load); a restart keeps the
// mark it reported.
func TestAStartedConsumerHasAMark(t *testing.T) {
	ctx, js, _ := setup(t)
	p, err := NewProgress(ctx, js, "preemptor")
	if err != nil {
		t.Fatal(err)
	}
	marks, err := ReadMarks(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := marks["preemptor"]; !ok || m.Seq != 0 {
		t.Fatalf("marks after start: %v, want preemptor at 0", marks)
	}
	if err := p.Report(ctx, 42); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := NewProgress(ctx, js, "preemptor"); err != nil {
		t.Fatal(err)
	}
	if seq, err := ReadProgress(ctx, js, "preemptor"); err != nil || seq != 42 {
		t.Errorf("after a restart: %d %v, want 42", seq, err)
	}
}

// TestMarksAreCoalesced: marks reported faster than one every
// progressEvery (here one a millisecond, as a consumer steps under load)
// are stored as the newest of them, one put per interval (counted on the
// bucket's stream), and the last is stored after Flush.
func TestMarksAreCoalesced(t *testing.T) {
	ctx, js, _ := setup(t)
	p, err := NewProgress(ctx, js, "admission-0")
	if err != nil {
		t.Fatal(err)
	}
	puts := func() uint64 {
		st, err := js.Stream(ctx, "KV_"+ProgressBucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := puts()
	start := time.Now()
	const n = 300
	for seq := uint64(1); seq <= n; seq++ {
		if err := p.Report(ctx, seq); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// One put at once, then at most one per interval begun, and the last.
	most := uint64(2 + elapsed/progressEvery)
	if got := puts() - before; got > most || got == 0 {
		t.Errorf("%d reports in %v made %d puts, want 1 to %d", n, elapsed, got, most)
	}
	if seq, err := ReadProgress(ctx, js, "admission-0"); err != nil || seq != n {
		t.Errorf("stored %d %v, want %d", seq, err, n)
	}
}

// TestAFailedPutIsReported: a put that fails comes back from the next
// Mark or Flush, so a consumer that cannot report its progress stops
// (and its supervisor starts it again) as when puts were synchronous.
func TestAFailedPutIsReported(t *testing.T) {
	ctx, js, _ := setup(t)
	p, err := NewProgress(ctx, js, "podsready")
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, ProgressBucket); err != nil {
		t.Fatal(err)
	}
	if err := p.Report(ctx, 7); err != nil {
		t.Fatalf("the hand-over failed: %v", err)
	}
	// The put's own error, not Flush giving up on the context's deadline.
	if err := p.Flush(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush after a failed put: %v, want the put's error", err)
	}
}

// TestMarksAreAllReadWhileTheyMove: every consumer's mark is read while
// the consumers report as fast as they can. (Listing the bucket's keys
// with a watcher missed a key whose value changed during the listing: the
// ingest gate then took admission for 50,000 events behind and refused
// submissions, and retention's gate could pass over a consumer.)
func TestMarksAreAllReadWhileTheyMove(t *testing.T) {
	ctx, js, _ := setup(t)
	names := []string{"admission", "admission-1", "podsready", "preemptor"}
	kv, err := progressBucket(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := kv.Put(ctx, n, []byte(`{"seq":0}`)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := 1; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, n := range names {
				if _, err := kv.Put(ctx, n, []byte(fmt.Sprintf(`{"seq":%d}`, seq))); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	missed := 0
	for range 200 {
		marks, err := ReadMarks(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if _, ok := marks[n]; !ok {
				missed++
			}
		}
	}
	close(stop)
	<-done
	if missed > 0 {
		t.Fatalf("%d marks missing from 200 readings of 4 consumers", missed)
	}
}
