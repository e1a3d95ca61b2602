package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/counterfactual"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/whatif"
)

// No tenant sees another. Every answer of a read route is cut, here, to
// what its caller may read, whichever path computed it (the projection,
// the log folded at a point in time, the ETA replica, a counterfactual
// search):
//
//   - a workload of a namespace where the caller may not get workloads
//     is counted, never named: explain's ahead names only readable ones
//     (aheadCount and aheadHidden count the rest); a counterfactual or an
//     ETA says "another workload" or "N workloads of other namespaces";
//     a workload's history hides the preemptor or victims of other
//     namespaces;
//   - what such a workload would tell about its team goes with its
//     name: its expected run time and finish time (ETA), its priority
//     (a counterfactual's threshold held only by such workloads);
//   - a ClusterQueue is named, with its limits, only to a caller who may
//     get it, or when it is the ClusterQueue of the workload the answer
//     is about (its own LocalQueue's, which its status names anyway).
//
// Routes that list (workloads, the object API, the push stream) are
// limited to readable namespaces in their queries instead. Kueue's
// visibility API shows every namespace's pending workloads to whoever may
// read a ClusterQueue's pending list, as Kueue does: that resource is the
// permission.

// visibility is what one request's caller may read, asked of the policy
// once per namespace or ClusterQueue and remembered for the request. It
// is used on the request's goroutine only.
type visibility struct {
	s   *Server
	r   *http.Request
	ns  map[string]bool
	cqs map[string]bool
}

type visibilityKey struct{}

// withVisibility gives r the visibility its answers are redacted with,
// so that every part of one answer is cut by the same decisions.
func (s *Server) withVisibility(r *http.Request) *http.Request {
	v := &visibility{s: s, ns: map[string]bool{}, cqs: map[string]bool{}}
	r = r.WithContext(context.WithValue(r.Context(), visibilityKey{}, v))
	v.r = r
	return r
}

// visibility is r's: the one withVisibility put on it, else a new one.
func (s *Server) visibility(r *http.Request) *visibility {
	if v, ok := r.Context().Value(visibilityKey{}).(*visibility); ok && v.s == s {
		return v
	}
	return s.withVisibility(r).Context().Value(visibilityKey{}).(*visibility)
}

// workloads says whether the caller may get workloads in ns.
func (v *visibility) workloads(ns string) bool {
	ok, seen := v.ns[ns]
	if !seen {
		ok = v.s.authorize(v.r, rbac.Attributes{Verb: "get", APIGroup: groupKueue, Resource: "workloads", Namespace: ns}) == nil
		v.ns[ns] = ok
	}
	return ok
}

// clusterQueue says whether the caller may get the ClusterQueue name.
func (v *visibility) clusterQueue(name string) bool {
	ok, seen := v.cqs[name]
	if !seen {
		ok = v.s.authorize(v.r, rbac.Attributes{Verb: "get", APIGroup: groupKueue, Resource: "clusterqueues", Name: name}) == nil
		v.cqs[name] = ok
	}
	return ok
}

// clusterQueueOf is clusterQueue, with the ClusterQueue of the workload
// an answer is about always readable.
func (v *visibility) clusterQueueOf(own string) func(string) bool {
	return func(name string) bool { return name == own || v.clusterQueue(name) }
}

// explanation names in ex.Ahead only the workloads the caller may read.
func (v *visibility) explanation(ex store.Explanation) store.Explanation {
	named := make([]string, 0, len(ex.Ahead))
	for _, k := range ex.Ahead {
		ns, _, _ := strings.Cut(k, "/")
		if v.workloads(ns) {
			named = append(named, k)
		}
	}
	ex.AheadHidden += len(ex.Ahead) - len(named)
	ex.Ahead = named
	return ex
}

// counterfactuals redacts res, the search for key, whose ClusterQueue is
// own.
func (v *visibility) counterfactuals(res *counterfactual.Result, key, own string) {
	res.Redact(key, counterfactual.Visibility{Namespace: v.workloads, ClusterQueue: v.clusterQueueOf(own)})
}

// estimate is e as the caller may see it (eta.Estimate.Redacted).
func (v *visibility) estimate(e *eta.Estimate) *eta.Estimate {
	return e.Redacted(v.workloads)
}

// whatIf hides the moved workloads the caller may not read.
func (v *visibility) whatIf(rep *whatif.Report) {
	for i := range rep.Moved {
		if m := &rep.Moved[i]; !m.Hidden && !v.workloads(m.Namespace) {
			m.Namespace, m.Name, m.Hidden = "", "", true
		}
	}
}

// events is a workload's history as the caller may see it: the victims
// of its preemptions and the preemptor of its evictions, when of a
// namespace it may not read, are {"hidden": true}; the preemptor's
// ClusterQueue is named only when the caller may read it. own is the
// workload's ClusterQueue.
func (v *visibility) events(own string, evs []store.Event) []store.Event {
	out := make([]store.Event, len(evs))
	for i, e := range evs {
		out[i] = e
		if d, ok := v.eventData(own, e.Data); ok {
			out[i].Data = d
		}
	}
	return out
}

var hiddenRef = json.RawMessage(`{"hidden":true}`)

// eventData redacts one event's data; false when nothing changed.
func (v *visibility) eventData(own string, data json.RawMessage) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil, false
	}
	changed := false
	if raw, ok := m["victims"]; ok {
		var victims []json.RawMessage
		if json.Unmarshal(raw, &victims) == nil {
			for i, vic := range victims {
				if !v.refVisible(vic) {
					victims[i] = hiddenRef
					changed = true
				}
			}
			m["victims"], _ = json.Marshal(victims)
		}
	}
	if raw, ok := m["preemptor"]; ok && !v.refVisible(raw) {
		m["preemptor"] = hiddenRef
		changed = true
	}
	if raw, ok := m["preemptorClusterQueue"]; ok {
		var cq string
		if json.Unmarshal(raw, &cq) != nil || !v.clusterQueueOf(own)(cq) {
			delete(m, "preemptorClusterQueue")
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	return b, true
}

// refVisible says whether a workload reference ({"namespace": ...}) is of
// a namespace the caller may read; a reference that does not decode is
// not.
func (v *visibility) refVisible(raw json.RawMessage) bool {
	var ref struct {
		Namespace string `json:"namespace"`
		Hidden    bool   `json:"hidden"`
	}
	if json.Unmarshal(raw, &ref) != nil {
		return false
	}
	return ref.Hidden || v.workloads(ref.Namespace)
}

// configVisible says whether the push stream may tell the caller of a
// change to a namespaced configuration object (a LocalQueue): only if it
// may get that kind in that namespace.
func (v *visibility) configVisible(kind, ns string) bool {
	if ns == "" {
		return true
	}
	gr, ok := kindResources[kind]
	return ok && v.s.authorize(v.r, rbac.Attributes{Verb: "get", APIGroup: gr[0], Resource: gr[1], Namespace: ns}) == nil
}
