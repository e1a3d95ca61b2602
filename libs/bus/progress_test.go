package bus

import "testing"

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
	if _, err := NewProgress(ctx, js, "preemptor"); err != nil {
		t.Fatal(err)
	}
	if seq, err := ReadProgress(ctx, js, "preemptor"); err != nil || seq != 42 {
		t.Errorf("after a restart: %d %v, want 42", seq, err)
	}
}
