package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// consoleHub is the one reader of JQ_EVENTS behind every console push
// stream (GET /v1/watch/workloads) of one Server. Each stream used to
// hold a consumer of its own and decode every event of the log, so that
// 100 idle streams made 400 submissions cost eight times the CPU: one
// caller's idle tabs slowed every caller's submissions. The hub reads
// the log once:
//
//	JQ_EVENTS ──one Reader──▶ decode once ──▶ frame (SSE bytes, once)
//	                                            │
//	                         ring (the last consoleRing frames)
//	                                            │
//	             per stream: namespace/config filter (a map lookup)
//	                         ──▶ bounded buffer ──▶ the stream's writer
//
// It starts with the first stream, at the log's end, and stops when the
// last one leaves (its ring goes with it: a later start begins again at
// the log's end). It never waits for a stream: one whose buffer is full
// has not kept up, and is ended; its client reconnects with ?since= the
// last id it got, as it does when a stream's lifetime ends. A reader
// failure ends every stream alike.
//
// What a stream is sent depends only on the log: the hub hands out the
// events after `last` in sequence order, and a stream skips any it
// already sent (seq not above what it sent), so that the switch from a
// stream's own catch-up reader to the hub (consolewatch.go) can neither
// skip nor repeat an event.
type consoleHub struct {
	mu   sync.Mutex
	subs map[*consoleSub]struct{}
	// stop ends the running reader; nil: none runs. gen tells a
	// reader that was stopped (and perhaps replaced) that its events
	// are no longer wanted.
	stop context.CancelFunc
	gen  uint64
	// ring holds the latest frames, oldest at head; the hub holds every
	// frame of the events after base up to last, the last event it read.
	ring       []*pushed
	head, n    int
	base, last uint64
	// decodes counts the events the hub decoded: once per event, however
	// many streams are open (TestConsoleDecodesEachEventOnce).
	decodes atomic.Int64
}

// consoleRing is how many frames the hub keeps for streams that start
// at ?since= a recent id; consoleBuffer is how many a stream may hold
// unwritten before it is ended for not keeping up. Variables for tests.
var (
	consoleRing   = 8192
	consoleBuffer = 1024
)

// pushed is one event as the streams send it, decoded and framed once.
type pushed struct {
	seq  uint64
	kind string // "workload" or "config"
	// ns is the workload's namespace (or the config object's), cfgKind
	// the config object's kind: what the streams filter on.
	ns, cfgKind string
	frame       []byte
}

// consoleSub is one stream as the hub sees it.
type consoleSub struct {
	allowed map[string]bool // nil: every namespace
	configs bool
	ch      chan *pushed
	ended   chan struct{} // closed when the hub ends the stream
	// abort unblocks a write stuck on a client that stopped reading.
	abort func()
	live  bool // under consoleHub.mu: takes the hub's events
}

func newConsoleSub(allowed map[string]bool, configs bool) *consoleSub {
	return &consoleSub{allowed: allowed, configs: configs, ch: make(chan *pushed, consoleBuffer), ended: make(chan struct{})}
}

// wants is the stream's cheap filter: a map lookup, no decoding. Whether
// a namespaced config object is visible is asked by the stream itself
// (consolewatch.go), as it needs the caller's authorization.
func (c *consoleSub) wants(p *pushed) bool {
	if p.kind == "workload" {
		return c.allowed == nil || c.allowed[p.ns]
	}
	return c.configs
}

// join counts sub among the hub's streams, starting the reader if none
// runs. sub takes nothing until attach.
func (h *consoleHub) join(ctx context.Context, s *Server, sub *consoleSub) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop == nil {
		if err := h.start(ctx, s); err != nil {
			return err
		}
	}
	if h.subs == nil {
		h.subs = map[*consoleSub]struct{}{}
	}
	h.subs[sub] = struct{}{}
	return nil
}

// leave forgets sub; the last stream to leave stops the reader.
func (h *consoleHub) leave(sub *consoleSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
	sub.live = false
	if len(h.subs) == 0 {
		h.halt()
	}
}

// attach makes sub take the hub's events after `after` (after the hub's
// present when now): it returns those the ring holds, which the stream
// sends first, and the position it starts from. It fails when the ring
// no longer reaches back to after: the stream reads that part itself.
func (h *consoleHub) attach(sub *consoleSub, after uint64, now bool) ([]*pushed, uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop == nil {
		// The reader failed and ended every stream; sub is ended too.
		return nil, after, false
	}
	if now {
		after = h.last
	}
	if after < h.base {
		return nil, after, false
	}
	var backlog []*pushed
	for i := range h.n {
		if p := h.ring[(h.head+i)%len(h.ring)]; p.seq > after && sub.wants(p) {
			backlog = append(backlog, p)
		}
	}
	sub.live = true
	return backlog, after, true
}

// start begins reading after the log's last event (under mu).
func (h *consoleHub) start(ctx context.Context, s *Server) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return err
	}
	end := info.State.LastSeq
	// The reader outlives the request that started it: it serves every
	// stream until the last leaves.
	rctx, cancel := context.WithCancel(context.Background())
	rd, err := bus.NewReader(rctx, s.js, events.Stream,
		jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: end + 1})
	if err != nil {
		cancel()
		return err
	}
	h.gen++
	h.stop = cancel
	h.ring, h.head, h.n = make([]*pushed, consoleRing), 0, 0
	h.base, h.last = end, end
	go h.read(rctx, h.gen, rd)
	return nil
}

// halt stops the reader (under mu).
func (h *consoleHub) halt() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
		h.ring, h.n = nil, 0
	}
}

// read is the hub's loop: read a batch, decode and frame each event
// once, then hand the frames out.
func (h *consoleHub) read(ctx context.Context, gen uint64, rd *bus.Reader) {
	defer rd.Close()
	for {
		msgs, err := bus.Batch(ctx, rd, 256, time.Second)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			h.fail(gen)
			return
		}
		if len(msgs) == 0 {
			continue
		}
		out := make([]*pushed, 0, len(msgs))
		var last uint64
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			last = meta.Sequence.Stream
			h.decodes.Add(1)
			if p, ok := frameOf(m, last); ok {
				out = append(out, p)
			}
		}
		if !h.hand(gen, out, last) {
			return
		}
	}
}

// hand keeps out in the ring and gives each frame to every live stream
// that wants it; a stream with no room left is ended. It says false
// once the reader is no longer the hub's.
func (h *consoleHub) hand(gen uint64, out []*pushed, last uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop == nil || h.gen != gen {
		return false
	}
	for _, p := range out {
		if h.n == len(h.ring) {
			h.base = h.ring[h.head].seq
			h.head = (h.head + 1) % len(h.ring)
			h.n--
		}
		h.ring[(h.head+h.n)%len(h.ring)] = p
		h.n++
		for sub := range h.subs {
			if !sub.live || !sub.wants(p) {
				continue
			}
			select {
			case sub.ch <- p:
			default:
				h.end(sub)
			}
		}
	}
	h.last = max(h.last, last)
	return true
}

// fail ends every stream of a reader that could not read (its streams
// would wait forever) and stops it; the next stream starts another.
func (h *consoleHub) fail(gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return
	}
	for sub := range h.subs {
		h.end(sub)
	}
	h.halt()
}

// end ends one stream (under mu).
func (h *consoleHub) end(sub *consoleSub) {
	sub.live = false
	select {
	case <-sub.ended:
	default:
		close(sub.ended)
		if sub.abort != nil {
			sub.abort()
		}
	}
}

// frameOf is what the streams send of one event, or false when they
// send nothing of it (an event about no workload and no config object,
// or one that does not decode: what no decider applies is not shown).
func frameOf(m jetstream.Msg, seq uint64) (*pushed, bool) {
	out, kind, ok := watched(m.Subject())
	if !ok {
		return nil, false
	}
	ev, err := bus.Decode(m)
	if err != nil {
		return nil, false
	}
	out.Seq, out.Type, out.Time = seq, string(ev.Type), ev.Time.UTC()
	data, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return &pushed{seq: seq, kind: kind, ns: out.Namespace, cfgKind: out.Kind,
		frame: fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", seq, kind, data)}, true
}

// watched is what the stream says of the event published on subject,
// and which kind it is. The subject says which workload (or config
// object) an event is about for every type, present and future: each
// event about a workload is published on its WorkloadSubject (the
// scorer's advice on its PlacedSubject), each config event on its
// ConfigSubject. A switch on the payload's type missed ActiveChanged
// and Placed.
func watched(subject string) (watchedEvent, string, bool) {
	a, ok := events.AboutSubject(subject)
	switch {
	case !ok:
		return watchedEvent{}, "", false
	case a.Config:
		return watchedEvent{Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}, "config", true
	}
	return watchedEvent{Namespace: a.Namespace, Name: a.Name}, "workload", true
}
