package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Pull reads a durable consumer through one running Consume, for Batch:
// the server fills a standing pull request as events arrive, and Pull
// hands out what it delivered. Fetching instead (Batch on the consumer
// itself) costs two pull requests and their answers for each batch, and a
// consumer that keeps up with a steady stream reads a batch of one or two
// events at a time. The saving is small next to the delivery itself: the
// preemptor went from 108-121 to 96 µs of CPU per workload at a steady
// 1,000 a second (make bench-latency, separate processes).
//
// What a Pull delivered and its owner did not acknowledge is delivered
// again by JetStream, to whoever reads the consumer next (after AckWait,
// or at once after Rewind). Once the Consume has stopped (the consumer
// deleted, the connection closed), Pull hands out what it holds and then
// reports the error; its owner starts over with a new one.
type Pull struct {
	cons   jetstream.Consumer
	cc     jetstream.ConsumeContext
	ch     chan jetstream.Msg
	stop   chan struct{}
	closed <-chan struct{}
}

// pullExpiry and pullHeartbeat are the standing pull request's: renewed
// before it expires, with the server's heartbeat while idle, so that a
// lost request is noticed (nats.go's Consume then pulls again).
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = 2 * time.Second
)

// NewPull starts reading cons, up to buffer messages ahead.
func NewPull(cons jetstream.Consumer, buffer int) (*Pull, error) {
	p := &Pull{cons: cons, ch: make(chan jetstream.Msg, buffer), stop: make(chan struct{})}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case p.ch <- m:
		case <-p.stop:
		}
	}, jetstream.PullMaxMessages(buffer), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		// Transient errors (a missed heartbeat, a reconnect) nats.go's
		// Consume recovers from itself; a terminal one closes it.
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {}))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", cons.CachedInfo().Name, err)
	}
	p.cc, p.closed = cc, cc.Closed()
	return p, nil
}

// Close stops the Consume; what it delivered and was not handed out is
// delivered again by JetStream.
func (p *Pull) Close() {
	close(p.stop)
	p.cc.Stop()
}

// errPullStopped is what a Pull reports once its Consume has stopped and
// everything it delivered was handed out.
var errPullStopped = errors.New("the consumer's delivery stopped (consumer deleted or connection closed)")

// FetchNoWait hands out up to batch delivered messages without waiting.
func (p *Pull) FetchNoWait(batch int) (jetstream.MessageBatch, error) {
	return p.read(batch, 0)
}

// Fetch waits for the first of up to batch messages as long as
// jetstream.Consumer's Fetch would by default (its options are not read);
// Batch waits with Wait instead.
func (p *Pull) Fetch(batch int, _ ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return p.read(batch, 30*time.Second)
}

// Wait hands out up to batch messages, waiting up to wait for the first.
func (p *Pull) Wait(batch int, wait time.Duration) (jetstream.MessageBatch, error) {
	return p.read(batch, wait)
}

// Info is the consumer's.
func (p *Pull) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	return p.cons.Info(ctx)
}

func (p *Pull) read(batch int, wait time.Duration) (jetstream.MessageBatch, error) {
	out := &readBatch{}
	if wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case m := <-p.ch:
			out.msgs = append(out.msgs, m)
		case <-p.closed:
		case <-timer.C:
		}
		timer.Stop()
	}
	for len(out.msgs) < batch {
		select {
		case m := <-p.ch:
			out.msgs = append(out.msgs, m)
			continue
		default:
		}
		break
	}
	if len(out.msgs) == 0 && isClosed(p.closed) && len(p.ch) == 0 {
		return nil, errPullStopped
	}
	return out.batch(), nil
}
