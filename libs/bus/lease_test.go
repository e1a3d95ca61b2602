package bus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLeaseAfterAnUnansweredRenewal: a renewal that went unanswered may
// have been stored, at a revision the holder never learnt. The next
// renewal and fence then find the key at another revision: still the
// holder's when it names the holder (no taker writes another's name), so
// the lease is kept rather than lost to a lost answer; lost when it
// names anyone else. Without the doubt, another revision is lost as
// before.
func TestLeaseAfterAnUnansweredRenewal(t *testing.T) {
	_, js := startJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, _, err := EnsureLeaseBucket(ctx, js, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		unsure bool
		writer string // who wrote the key behind the lease's back
		check  bool   // fence rather than renew
		kept   bool
	}{
		"renew: stored unanswered":     {unsure: true, writer: "me", kept: true},
		"fence: stored unanswered":     {unsure: true, writer: "me", check: true, kept: true},
		"renew: taken since":           {unsure: true, writer: "other"},
		"fence: taken since":           {unsure: true, writer: "other", check: true},
		"renew: no renewal unanswered": {writer: "me"},
		"fence: no renewal unanswered": {writer: "me", check: true},
	} {
		t.Run(name, func(t *testing.T) {
			key := "k" + time.Now().Format("150405.000000000")
			l, err := Acquire(ctx, kv, key, "me")
			if err != nil {
				t.Fatal(err)
			}
			// The renewal stored whose answer was lost, or a taker's write.
			if _, err := kv.Put(ctx, key, []byte(c.writer)); err != nil {
				t.Fatal(err)
			}
			l.unsure = c.unsure
			op := l.Renew
			if c.check {
				op = l.Check
			}
			err = op(ctx)
			if kept := err == nil; kept != c.kept {
				t.Fatalf("kept %v (%v), want %v", kept, err, c.kept)
			}
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				t.Errorf("%v, want ErrLeaseLost", err)
			}
			if c.kept {
				if err := l.Check(ctx); err != nil {
					t.Errorf("the fence after: %v", err)
				}
			}
		})
	}
}
