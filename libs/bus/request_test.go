package bus

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRequestsToAFrozenServerFailFast: once the server a service's
// connection is on stops answering (frozen with SIGSTOP: no reset tells
// the client, as with a NATS server stopped in the chaos-cluster suite),
// each request of a decider's loop fails within RequestTimeout, not
// nats.go's default 5 s, so that the loop asks again over the next
// server: the Reader's consumer info and its next consumer's creation,
// and a standby's acquire of a lease. Each failure is transient: the
// loop retries it in place.
func TestRequestsToAFrozenServerFailFast(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a child nats-server for several seconds")
	}
	url, child := childServer(t, true)
	nc, err := Connect(url, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	kv, _, err := EnsureLeaseBucket(ctx, js, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder := NewLeadership(kv, "shard-0", "holder", 5*time.Second)
	if leading, err := holder.Lead(ctx); err != nil || !leading {
		t.Fatalf("lead: %v, %v", leading, err)
	}
	standby := NewLeadership(kv, "shard-0", "standby", 5*time.Second)
	r, err := NewReader(ctx, js, "S", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	if err := child.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The client notices a frozen server only after its pings go
	// unanswered (about 6 s): until then every request is sent to it.
	bound := RequestTimeout + time.Second
	for _, c := range []struct {
		name string
		ask  func() error
	}{
		{"the consumer's info", func() error { _, err := r.Info(ctx); return err }},
		{"a new consumer", func() error { _, err := r.FetchNoWait(1); return err }},
		{"a standby's acquire", func() error { _, err := standby.Lead(ctx); return err }},
	} {
		start := time.Now()
		err := c.ask()
		took := time.Since(start)
		t.Logf("%s: %v after %s", c.name, err, took.Round(10*time.Millisecond))
		if err == nil {
			t.Errorf("%s: answered by a frozen server", c.name)
			continue
		}
		if took > bound {
			t.Errorf("%s failed after %s, want within %s", c.name, took.Round(10*time.Millisecond), bound)
		}
		if !Transient(err) || errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s: %v, want a transient error the loop asks again", c.name, err)
		}
	}
}
