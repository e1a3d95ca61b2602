package bus

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPullHandsOutEveryMessageOnce: a durable consumer read through Pull
// with Batch, acknowledged (AckAll) after each batch, hands out every
// message once and in order, while they are being published; after
// that the consumer has nothing pending and nothing unacknowledged. Once
// the consumer is deleted, Pull reports it rather than waiting for ever.
func TestPullHandsOutEveryMessageOnce(t *testing.T) {
	ctx, js, s := setup(t)
	c, err := EnsureConsumer(ctx, s, ConsumerOptions{Durable: "pull", AckAll: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPull(c, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 700
	published := make(chan error, 1)
	go func() {
		for i := range n {
			if _, _, err := Publish(ctx, js, podsReady(fmt.Sprint("id-", i), "ns", fmt.Sprint("w", i)), nil); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	var last uint64
	for got := 0; got < n; {
		msgs, err := Batch(ctx, p, 50, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("nothing handed out after %d of %d", got, n)
		}
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if meta.Sequence.Stream != last+1 {
				t.Fatalf("handed out %d after %d", meta.Sequence.Stream, last)
			}
			last = meta.Sequence.Stream
			got++
		}
		if err := msgs[len(msgs)-1].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream != n {
		t.Fatalf("pending %d, unacknowledged %d, acknowledged to %d; want 0, 0, %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, n)
	}
	if err := s.DeleteConsumer(ctx, "pull"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := Batch(ctx, p, 50, 200*time.Millisecond)
		if errors.Is(err, errPullStopped) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted consumer was not reported")
		}
	}
}
