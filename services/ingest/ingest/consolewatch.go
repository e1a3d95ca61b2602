package ingest

import (
	"context"
	"encoding/json"
	"fmt"
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
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if since > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: since + 1}
	}
	cons, err := bus.NewReader(ctx, s.js, events.Stream, cfg)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer cons.Close()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(watchLifetime + 10*time.Second))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": watching\n\n")
	_ = rc.Flush()
	idle := time.Now()
	for ctx.Err() == nil {
		msgs, err := bus.Batch(ctx, cons, 256, time.Second)
		if err != nil {
			return
		}
		sent := false
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			ev, err := bus.Decode(m)
			if err != nil {
				continue
			}
			out, kind, ok := watched(ev)
			if !ok || kind == "workload" && allowed != nil && !allowed[out.Namespace] || kind == "config" && (!configs || !vis.configVisible(out.Kind, out.Namespace)) {
				continue
			}
			out.Seq, out.Type, out.Time = meta.Sequence.Stream, string(ev.Type), ev.Time.UTC()
			data, err := json.Marshal(out)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", out.Seq, kind, data); err != nil {
				return
			}
			sent = true
		}
		if !sent && time.Since(idle) < watchHeartbeat {
			continue
		}
		if !sent {
			if _, err := fmt.Fprint(w, ": idle\n\n"); err != nil {
				return
			}
		}
		idle = time.Now()
		if rc.Flush() != nil {
			return
		}
	}
}

// watched is what the stream says of an event, and which kind it is.
func watched(ev events.Event) (watchedEvent, string, bool) {
	var ref events.WorkloadRef
	switch d := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		ref = d.WorkloadRef
	case *events.PriorityChangedData:
		ref = d.WorkloadRef
	case *events.WorkloadFinishedData:
		ref = d.WorkloadRef
	case *events.QuotaReservedData:
		ref = d.WorkloadRef
	case *events.InadmissibleData:
		ref = d.WorkloadRef
	case *events.PreemptionRequestedData:
		ref = d.WorkloadRef
	case *events.EvictedData:
		ref = d.WorkloadRef
	case *events.RequeuedData:
		ref = d.WorkloadRef
	case *events.WorkloadRef:
		ref = *d
	case *events.ConfigAppliedData:
		return watchedEvent{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}, "config", true
	case *events.ConfigRef:
		return watchedEvent{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}, "config", true
	default:
		return watchedEvent{}, "", false
	}
	return watchedEvent{Namespace: ref.Namespace, Name: ref.Name}, "workload", true
}
