package bus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Fetcher is what Batch and Follow read from: a jetstream.Consumer, or a
// Reader.
type Fetcher interface {
	FetchNoWait(batch int) (jetstream.MessageBatch, error)
	Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error)
	Info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// Reader reads a stream in order, every message once, as nats.go's ordered
// consumer does, but from one ephemeral pull consumer that lives across
// reads. The ordered consumer deletes its consumer and creates another
// on every Fetch (nats.go says so: it is meant for Consume), which cost two
// API requests and a consumer's setup on the server for each batch every
// service read: about 8% of the CPU of a steady run at 1,000 workloads a
// second. The Reader keeps one Consume running on its consumer (pull
// requests of readerBuffer messages, renewed as they are used, which the
// server fills as events arrive) and hands out what it delivered:
// fetching instead cost a pull request and its answer per read, and at a
// steady 200 workloads a second, where each read finds an event or two,
// those requests were most of every service's and the NATS server's CPU.
//
// Nothing is skipped: a message's consumer sequence must follow the last
// one handed out. A gap (messages of a fetch lost on the way, after a
// client-side timeout or a reconnect), any fetch error, or the consumer gone
// (a NATS restart, the inactivity threshold) drops the consumer; the next
// fetch starts a fresh one at the stream sequence after the last message
// handed out, exactly where the ordered consumer would.
type Reader struct {
	ctx    context.Context
	js     jetstream.JetStream
	stream string
	cfg    jetstream.OrderedConsumerConfig

	cons jetstream.Consumer // nil: start one before the next read
	feed *feed              // the Consume on cons
	next uint64             // the stream sequence to start at; 0: as cfg says
	cseq uint64             // the consumer sequence of the last message handed out
}

// feed is a running Consume: the messages it delivered, in order, not yet
// handed out; failed is closed once it reported an error (the consumer
// gone, the connection lost, a heartbeat missed), after which the Reader
// hands out what it holds and then starts a fresh consumer; stop unblocks
// its handler when the Reader drops it.
type feed struct {
	cc     jetstream.ConsumeContext
	ch     chan jetstream.Msg
	failed chan struct{}
	fail   sync.Once
	stop   chan struct{}
}

// readerBuffer is how many messages a Reader's Consume asks for ahead;
// its pull requests last readerExpiry, with a heartbeat every
// readerHeartbeat while idle. The server does not tell a pull request
// that its consumer was deleted: two missed heartbeats do, so a Reader
// finds out within seconds even when nothing asks for the consumer's
// info (Follow asks whenever a wait comes back empty).
const (
	readerBuffer    = 512
	readerExpiry    = 10 * time.Second
	readerHeartbeat = 2 * time.Second
)

// readerInactive is how long the server keeps a Reader's consumer without
// a pull request (a dropped Reader whose delete was lost), as for an
// ordered consumer.
const readerInactive = 5 * time.Minute

// NewReader starts a Reader of stream; ctx bounds the requests that start
// its consumers.
func NewReader(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig) (*Reader, error) {
	r := &Reader{ctx: ctx, js: js, stream: stream, cfg: cfg}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

// start creates the consumer at r.next (or where cfg says, before the first
// message).
func (r *Reader) start() error {
	cc := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     r.cfg.DeliverPolicy,
		OptStartSeq:       r.cfg.OptStartSeq,
		OptStartTime:      r.cfg.OptStartTime,
		ReplayPolicy:      r.cfg.ReplayPolicy,
		HeadersOnly:       r.cfg.HeadersOnly,
		InactiveThreshold: readerInactive,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if r.cfg.InactiveThreshold > 0 {
		cc.InactiveThreshold = r.cfg.InactiveThreshold
	}
	if len(r.cfg.FilterSubjects) == 1 {
		cc.FilterSubject = r.cfg.FilterSubjects[0]
	} else {
		cc.FilterSubjects = r.cfg.FilterSubjects
	}
	if r.next > 0 {
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = jetstream.DeliverByStartSequencePolicy, r.next, nil
	}
	// Bounded: asked of a server that died or froze, or of a stream
	// between leaders, the creation fails within RequestTimeout and the
	// caller asks again in place, rather than waiting out nats.go's 5 s.
	ctx, cancel := Bounded(r.ctx)
	c, err := r.js.CreateConsumer(ctx, r.stream, cc)
	cancel()
	if err != nil {
		return err
	}
	f := &feed{ch: make(chan jetstream.Msg, readerBuffer), failed: make(chan struct{}), stop: make(chan struct{})}
	failed := func() { f.fail.Do(func() { close(f.failed) }) }
	f.cc, err = c.Consume(func(m jetstream.Msg) {
		select {
		case f.ch <- m:
		case <-f.stop:
		}
	}, jetstream.PullMaxMessages(readerBuffer), jetstream.PullExpiry(readerExpiry), jetstream.PullHeartbeat(readerHeartbeat),
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) { failed() }))
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.js.DeleteConsumer(ctx, r.stream, c.CachedInfo().Name)
		return err
	}
	r.cons, r.feed, r.cseq = c, f, 0
	return nil
}

// drop forgets the consumer (deleting it, best effort); the next fetch
// starts another after the last message handed out.
func (r *Reader) drop() {
	if r.cons == nil {
		return
	}
	name := r.cons.CachedInfo().Name
	close(r.feed.stop)
	r.feed.cc.Stop()
	r.cons, r.feed = nil, nil
	// In the background: a Reader drops its consumer when the consumer's
	// server stopped answering, and the delete would go unanswered too,
	// holding up the next consumer's start for its whole timeout. One
	// never deleted lapses after readerInactive.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.js.DeleteConsumer(ctx, r.stream, name)
	}()
}

// Close deletes the consumer.
func (r *Reader) Close() { r.drop() }

// FetchNoWait hands out up to batch messages the consume has delivered,
// in order and without gaps, without waiting.
func (r *Reader) FetchNoWait(batch int) (jetstream.MessageBatch, error) {
	return r.read(batch, 0)
}

// Fetch waits for the first of up to batch messages as long as
// jetstream.Consumer's Fetch would by default (its options are not
// read); Batch and Follow wait with Wait instead.
func (r *Reader) Fetch(batch int, _ ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return r.read(batch, 30*time.Second)
}

// Wait hands out up to batch messages, waiting up to wait for the first.
func (r *Reader) Wait(batch int, wait time.Duration) (jetstream.MessageBatch, error) {
	return r.read(batch, wait)
}

// Info is the consumer's.
func (r *Reader) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	if r.cons == nil {
		if err := r.start(); err != nil {
			return nil, err
		}
	}
	ictx, cancel := Bounded(ctx)
	info, err := r.cons.Info(ictx)
	cancel()
	if err != nil {
		// The consumer's server may be gone: a fresh consumer is placed
		// on a live one.
		r.drop()
	}
	return info, err
}

// read hands out up to batch messages of the feed, waiting up to wait for
// the first; a feed that failed is replaced once what it delivered is
// handed out.
func (r *Reader) read(batch int, wait time.Duration) (jetstream.MessageBatch, error) {
	if r.feed != nil && len(r.feed.ch) == 0 && isClosed(r.feed.failed) {
		r.drop()
	}
	if r.cons == nil {
		if err := r.start(); err != nil {
			return nil, err
		}
	}
	out := &readBatch{}
	f := r.feed
	take := func(m jetstream.Msg) bool {
		meta, err := m.Metadata()
		if err != nil || meta.Sequence.Consumer != r.cseq+1 {
			// A gap (messages lost on the way, or taken by another
			// reader of the consumer): what came before stands, the rest
			// is read from a fresh consumer by the next read.
			out.gap = true
			return false
		}
		r.cseq, r.next = meta.Sequence.Consumer, meta.Sequence.Stream+1
		out.msgs = append(out.msgs, m)
		return len(out.msgs) < batch
	}
	more := true
	if wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case m := <-f.ch:
			more = take(m)
		case <-f.failed:
		case <-timer.C:
		case <-r.ctx.Done():
		}
		timer.Stop()
	}
	for more && len(out.msgs) < batch {
		select {
		case m := <-f.ch:
			more = take(m)
		default:
			more = false
		}
	}
	if out.gap {
		r.drop()
	}
	return out.batch(), nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readBatch is a fetch's messages up to the first gap.
type readBatch struct {
	msgs []jetstream.Msg
	err  error
	gap  bool
}

func (b *readBatch) batch() jetstream.MessageBatch {
	ch := make(chan jetstream.Msg, len(b.msgs))
	for _, m := range b.msgs {
		ch <- m
	}
	close(ch)
	return &doneBatch{ch: ch, err: b.err}
}

// doneBatch is a jetstream.MessageBatch already read to its end.
type doneBatch struct {
	ch  chan jetstream.Msg
	err error
}

func (d *doneBatch) Messages() <-chan jetstream.Msg { return d.ch }
func (d *doneBatch) Error() error                   { return d.err }
