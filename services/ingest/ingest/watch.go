package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// A watch (?watch=true on a list of the object API) is Kubernetes'
// watch: a chunked answer of one JSON line per change,
// {"type":"ADDED|MODIFIED|DELETED","object":{...}}, pushed as the event
// stream moves:
//
//	JQ_EVENTS ──ordered consumer (the kind's subjects, from the start position)──▶ wait for the projection to hold the events (woken by the projector's commit, store.Progress)
//	          ──▶ read the objects they touched ──▶ compare with what this watch last sent ──▶ write and flush
//
// Without resourceVersion (or with "0") the watch first sends every
// selected object as ADDED, then every change after the projection's
// position at that moment. With resourceVersion=N it follows the events
// after N, and an object it has not sent before is MODIFIED. An object
// that stops matching the selectors, or is deleted, is DELETED. The
// answer ends after timeoutSeconds (default 1800, at most 3600).

const (
	defaultWatchTimeout = 30 * time.Minute
	maxWatchTimeout     = time.Hour
)

// watchBuffer bounds the events one watch holds that its reader has not
// taken yet (a variable for tests).
var watchBuffer = 256

// maxWatches bounds the watches one server follows at once (each holds a
// JetStream consumer and a connection); a caller holds at most its share,
// --max-watches-per-caller (streams.go). A variable for tests.
var maxWatches = 512

type watchEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// watchObjects serves a watch. Errors before the first byte are answered
// as usual; after it, the stream simply ends.
func (s *Server) watchObjects(w http.ResponseWriter, r *http.Request, d resourceDef) error {
	q, err := parseObjectQuery(r, d)
	if err != nil {
		return err
	}
	q.limit = 1000
	timeout := defaultWatchTimeout
	if v := r.URL.Query().Get("timeoutSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxWatchTimeout {
			return fail(http.StatusBadRequest, "", "timeoutSeconds", "must be an integer from 1 to 3600")
		}
		timeout = time.Duration(n) * time.Second
	}
	var from uint64
	initial := true
	if v := r.URL.Query().Get("resourceVersion"); v != "" && v != "0" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fail(http.StatusBadRequest, "", "resourceVersion", "must be a resourceVersion this server gave")
		}
		from, initial = n, false
	}
	if err := s.authorizeRead(r, &q, "watch"); err != nil {
		return err
	}
	if !initial {
		if err := s.notBeyondLog(r.Context(), from, "resourceVersion"); err != nil {
			return err
		}
	}
	release, err := s.streamSlot(r, objectWatch, maxWatches)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if initial {
		if from, err = s.store.LastSeq(ctx); err != nil {
			return err
		}
	}
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: watchSubjects(q), DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1})
	if err != nil {
		return err
	}
	// A watch buffers at most watchBuffer events. One whose reader falls
	// that far behind (its connection does not take what is written) is
	// ended with an ERROR event, 410 Expired, as Kubernetes ends a watch
	// that cannot keep up; the client watches again from the last
	// resourceVersion it saw, or lists again.
	msgs := make(chan jetstream.Msg, watchBuffer)
	tooSlow := make(chan struct{})
	var slowOnce sync.Once
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		default:
			slowOnce.Do(func() { close(tooSlow) })
		}
	})
	if err != nil {
		return err
	}
	defer cc.Stop()

	extendWrite(w, timeout)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	sent := map[string]string{}
	send := func(typ string, u *unstructured.Unstructured) bool {
		key := u.GetNamespace() + "/" + u.GetName()
		b, _ := json.Marshal(u.Object)
		switch {
		case typ == "DELETED":
			delete(sent, key)
		case sent[key] == string(b):
			return true
		case typ == "":
			typ = "MODIFIED"
			if _, ok := sent[key]; !ok && initial {
				typ = "ADDED"
			}
		}
		if typ != "DELETED" {
			sent[key] = string(b)
		}
		if err := enc.Encode(watchEvent{Type: typ, Object: u.Object}); err != nil {
			return false
		}
		return true
	}
	objects := map[string]*unstructured.Unstructured{}
	if initial {
		items, err := s.allObjects(ctx, q)
		if err != nil {
			s.log.Warn("watch: initial list", zap.Error(err))
			return nil
		}
		for _, u := range items {
			objects[u.GetNamespace()+"/"+u.GetName()] = u
			if !send("ADDED", u) {
				return nil
			}
		}
		_ = rc.Flush()
	}
	for {
		var batch []jetstream.Msg
		select {
		case <-ctx.Done():
			return nil
		case <-tooSlow:
			_ = enc.Encode(watchEvent{Type: "ERROR", Object: map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
				"status": "Failure", "reason": "Expired", "code": int64(http.StatusGone),
				"message": fmt.Sprintf("the watch fell more than %d events behind; watch again from the last resourceVersion seen", watchBuffer)}})
			_ = rc.Flush()
			return nil
		case m := <-msgs:
			batch = append(batch, m)
		}
	drain:
		for len(batch) < cap(msgs) {
			select {
			case m := <-msgs:
				batch = append(batch, m)
			default:
				break drain
			}
		}
		last, _ := batch[len(batch)-1].Metadata()
		if last == nil || !s.waitProjection(ctx, last.Sequence.Stream) {
			return nil
		}
		var current []*unstructured.Unstructured
		if q.def.Kind == api.KindWorkload {
			// Only the workloads the events are about are read again.
			touched := map[[2]string]bool{}
			for _, m := range batch {
				if ns, name, ok := workloadOfSubject(m.Subject()); ok {
					touched[[2]string{ns, name}] = true
				}
			}
			for k := range touched {
				key := k[0] + "/" + k[1]
				u, err := s.oneWorkload(ctx, q, k[0], k[1])
				if err != nil {
					s.log.Warn("watch: read", zap.Error(err))
					return nil
				}
				if u == nil {
					if prev, ok := objects[key]; ok {
						delete(objects, key)
						if !send("DELETED", prev) {
							return nil
						}
					}
					continue
				}
				objects[key] = u
				current = append(current, u)
			}
		} else {
			items, err := s.allObjects(ctx, q)
			if err != nil {
				s.log.Warn("watch: read", zap.Error(err))
				return nil
			}
			seen := map[string]bool{}
			for _, u := range items {
				seen[u.GetNamespace()+"/"+u.GetName()] = true
			}
			for key, prev := range objects {
				if !seen[key] {
					delete(objects, key)
					if !send("DELETED", prev) {
						return nil
					}
				}
			}
			for _, u := range items {
				objects[u.GetNamespace()+"/"+u.GetName()] = u
			}
			current = items
		}
		for _, u := range current {
			if !send("", u) {
				return nil
			}
		}
		if rc.Flush() != nil {
			return nil
		}
	}
}

// watchSubjects are the event subjects that can change what q selects.
func watchSubjects(q objectQuery) []string {
	cfg := func(kind string) string {
		return strings.Join([]string{events.SubjectRoot, "cfg", events.Token(kind), ">"}, ".")
	}
	workloads := events.SubjectRoot + ".wl.>"
	switch q.def.Kind {
	case api.KindWorkload:
		switch {
		case q.namespace != "" && q.name != "":
			return []string{events.WorkloadSubject(q.namespace, q.name)}
		case q.namespace != "":
			return []string{strings.Join([]string{events.SubjectRoot, "wl", events.Token(q.namespace), ">"}, ".")}
		}
		return []string{workloads}
	case api.KindClusterQueue:
		return []string{cfg(api.KindClusterQueue), cfg(api.KindResourceFlavor), workloads}
	case api.KindLocalQueue:
		return []string{cfg(api.KindLocalQueue), cfg(api.KindClusterQueue), cfg(api.KindResourceFlavor), workloads}
	}
	return []string{cfg(q.def.Kind)}
}

// workloadOfSubject reads a workload subject's namespace and name.
func workloadOfSubject(subject string) (string, string, bool) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[2] != "wl" {
		return "", "", false
	}
	ns, err1 := events.ParseToken(parts[3])
	name, err2 := events.ParseToken(parts[4])
	return ns, name, err1 == nil && err2 == nil
}

// allObjects reads every object q selects, page after page.
func (s *Server) allObjects(ctx context.Context, q objectQuery) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for {
		items, next, err := s.objects(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		q.continue_ = next
	}
}

// oneWorkload reads one workload if q selects it (nil otherwise).
func (s *Server) oneWorkload(ctx context.Context, q objectQuery, ns, name string) (*unstructured.Unstructured, error) {
	if q.namespaces != nil && !namespaceSet(q.namespaces)[ns] {
		return nil, nil
	}
	rows, _, err := s.store.WorkloadObjects(ctx, store.Filter{Namespace: ns, Name: name, Limit: 1})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	u, err := workloadObject(rows[0])
	if err != nil {
		return nil, err
	}
	if !s.matches(q, u, map[string]string{"status": rows[0].Status, "clusterQueue": rows[0].ClusterQueue}) {
		return nil, nil
	}
	return u, nil
}

// waitProjection waits until the projection holds the stream up to seq;
// false when ctx ends first. It is woken by the projector's commit (see
// store.Progress): nothing is polled.
func (s *Server) waitProjection(ctx context.Context, seq uint64) bool {
	_, err := s.projected().Wait(ctx, seq)
	return err == nil
}
