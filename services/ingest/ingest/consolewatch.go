package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// GET /v1/watch/workloads is a server-push stream (text/event-stream) of
// what happens from now on (or after ?since=SEQ): each event of JQ_EVENTS
// about a workload in a namespace the caller may watch workloads in, as
// `event: workload` with {seq, type, time, namespace, name}, and each
// configuration change as `event: config` with {seq, type, time, kind,
// namespace, name} when the caller may list clusterqueues. It is authorized
// as watch on workloads (?namespace=, else every namespace the caller may
// watch in, as a list is). The stream ends after watchLifetime; clients
// reconnect with ?since= the last seq they saw. The console's live updates
// read it.
//
// Every stream of a Server takes its events from one reader, the
// consoleHub (consolehub.go), which decodes and frames each event once;
// a stream only filters them (a namespace lookup) and writes the bytes.
// A stream that starts at a ?since= older than the hub's ring reads that
// part with a reader of its own, then joins the hub. A stream that does
// not keep up is ended, as at the end of its lifetime.

// watchLifetime bounds one stream.
const watchLifetime = 10 * time.Minute

// watchHeartbeat is how often an idle stream sends a comment.
const watchHeartbeat = 15 * time.Second

// maxWatchers bounds the streams open at once on one ingest; a caller
// holds at most its share, --max-watches-per-caller (streams.go). A
// variable for tests.
var maxWatchers = 256

type watchedEvent struct {
	Seq       uint64    `json:"seq"`
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
}

func (s *Server) watchWorkloads(w http.ResponseWriter, r *http.Request) {
	r = withRequestID(w, r)
	q := r.URL.Query()
	ns := q.Get("namespace")
	if len(ns) > 253 {
		s.writeError(w, r, fail(http.StatusBadRequest, "", "namespace", "longer than 253 characters"))
		return
	}
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, r, fail(http.StatusBadRequest, "", "since", "must be a stream sequence (a non-negative integer)"))
			return
		}
		since = n
	}
	watch := rbac.Attributes{Verb: "watch", APIGroup: groupKueue, Resource: "workloads", Namespace: ns}
	var allowed map[string]bool
	if ns != "" {
		if err := s.authorize(r, watch); err != nil {
			s.writeError(w, r, err)
			return
		}
		allowed = map[string]bool{ns: true}
	} else {
		nss, err := s.visibleNamespaces(r, watch)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if nss != nil {
			allowed = map[string]bool{}
			for _, n := range nss {
				allowed[n] = true
			}
		}
	}
	if since > 0 {
		if err := s.notBeyondLog(r.Context(), since, "since"); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	configs := s.authorize(r, rbac.Attributes{Verb: "list", APIGroup: groupKueue, Resource: "clusterqueues"}) == nil
	vis := s.visibility(r)
	release, err := s.streamSlot(r, consoleStream, maxWatchers)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), watchLifetime)
	defer cancel()
	rc := http.NewResponseController(w)
	sub := newConsoleSub(allowed, configs)
	// A write stuck on a client that stopped reading fails at once when
	// the hub ends the stream.
	sub.abort = func() { _ = rc.SetWriteDeadline(time.Now()) }
	if err := s.console.join(ctx, s, sub); err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.console.leave(sub)
	// From the hub's ring when it reaches back to since (or from now);
	// else from a reader of this stream's own until it does.
	backlog, sent, live := s.console.attach(sub, since, since == 0)
	var own *bus.Reader
	if !live {
		// Without since the hub fails to attach only when its reader
		// failed (and ended sub): read from now, never the whole log.
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
		if since > 0 {
			cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: since + 1}
		}
		own, err = bus.NewReader(ctx, s.js, events.Stream, cfg)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer func() {
			if own != nil {
				own.Close()
			}
		}()
	}
	_ = rc.SetWriteDeadline(time.Now().Add(watchLifetime + 10*time.Second))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": watching\n\n")
	if rc.Flush() != nil {
		return
	}
	st := &consoleWriter{w: consoleWrites(r, w), sub: sub, vis: vis, sent: sent}
	if st.send(backlog) != nil || rc.Flush() != nil {
		return
	}
	idle := time.Now()
	for own != nil && ctx.Err() == nil {
		// Catching up: this stream decodes what it reads itself, as
		// every stream once did, until the hub's ring reaches back to
		// where it is.
		msgs, err := bus.Batch(ctx, own, 256, time.Second)
		if err != nil || isDone(sub.ended) {
			return
		}
		var read uint64
		var out []*pushed
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			read = meta.Sequence.Stream
			if p, ok := frameOf(m, read); ok && sub.wants(p) {
				out = append(out, p)
			}
		}
		n := st.written
		if st.send(out) != nil {
			return
		}
		if read > 0 {
			if backlog, _, ok := s.console.attach(sub, read, false); ok {
				own.Close()
				own = nil
				if st.send(backlog) != nil {
					return
				}
			}
		}
		if st.written == n && time.Since(idle) < watchHeartbeat {
			continue
		}
		if st.written == n {
			if _, err := fmt.Fprint(st.w, ": idle\n\n"); err != nil {
				return
			}
		}
		idle = time.Now()
		if rc.Flush() != nil {
			return
		}
	}
	heartbeat := time.NewTimer(watchHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.ended:
			// The hub ended it (its buffer full, or the reader failed):
			// the client reconnects with ?since= the last id it got.
			return
		case <-heartbeat.C:
			if _, err := fmt.Fprint(st.w, ": idle\n\n"); err != nil {
				return
			}
		case p := <-sub.ch:
			batch := []*pushed{p}
			for len(batch) < 256 && len(sub.ch) > 0 {
				batch = append(batch, <-sub.ch)
			}
			if st.send(batch) != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
		heartbeat.Reset(watchHeartbeat)
	}
}

// consoleWrites is where a stream writes its events; tests put a writer
// that blocks there, to stand for a client that stopped reading.
var consoleWrites = func(_ *http.Request, w io.Writer) io.Writer { return w }

// consoleWriter writes one stream's frames in sequence order, each once.
type consoleWriter struct {
	w    io.Writer
	sub  *consoleSub
	vis  *visibility
	sent uint64 // the last seq sent, or the position the stream started at
	// written counts the frames written; cfgs remembers whether the
	// caller may see a namespaced config object's kind in a namespace.
	written int
	cfgs    map[[2]string]bool
}

// send writes those of ps after what was sent, in order; config
// objects only where the caller may get them (asked once per kind and
// namespace: a stream's caller does not change).
func (c *consoleWriter) send(ps []*pushed) error {
	for _, p := range ps {
		if p.seq <= c.sent {
			continue
		}
		if p.kind == "config" && p.ns != "" {
			key := [2]string{p.cfgKind, p.ns}
			ok, seen := c.cfgs[key]
			if !seen {
				if c.cfgs == nil {
					c.cfgs = map[[2]string]bool{}
				}
				ok = c.vis.configVisible(p.cfgKind, p.ns)
				c.cfgs[key] = ok
			}
			if !ok {
				continue
			}
		}
		if _, err := c.w.Write(p.frame); err != nil {
			return err
		}
		c.sent = p.seq
		c.written++
	}
	return nil
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
