package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/store"
)

// ETAs (libs/eta) are computed from JQ_EVENTS as the other history
// answers are: the log up to the request's instant (?at=, or its end) is
// folded, and the core runs forward from it. One computation serves every
// request while the log has not grown and, without ?at=, for etaFresh of
// the clock.

// etaFresh is how long ETAs computed at the log's end are served while
// the log has not grown.
const etaFresh = 10 * time.Second

// MaxETAOffset bounds ?offset= of GET /v1/eta.
const MaxETAOffset = 10_000_000

// etaCache holds the last computation.
type etaCache struct {
	mu   sync.Mutex
	last *etaSnapshot
}

// etaSnapshot is every pending workload, in ClusterQueue order with its
// position and estimate, as of one prefix of the log.
type etaSnapshot struct {
	at, now time.Time
	lastSeq uint64
	asOf    *AsOf
	items   []etaItem
	byKey   map[string]*etaItem
	res     *eta.Result
}

// etaItem is one pending workload of GET /v1/eta.
type etaItem struct {
	store.WorkloadView
	// Position is its 0-based place in its ClusterQueue's pending order
	// (priority, then creation, then namespace/name), over every pending
	// workload, read or not.
	Position int           `json:"positionInClusterQueue"`
	ETA      *eta.Estimate `json:"eta"`
}

var etaCaches sync.Map // *Server → *etaCache

func (s *Server) etaCache() *etaCache {
	c, _ := etaCaches.LoadOrStore(s, &etaCache{})
	return c.(*etaCache)
}

// etas returns the estimates as of at (zero: the log's end, now).
func (s *Server) etas(ctx context.Context, at time.Time) (*etaSnapshot, error) {
	c := s.etaCache()
	c.mu.Lock()
	defer c.mu.Unlock()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	now := at
	if now.IsZero() {
		now = s.cfg.Now().UTC()
	}
	if l := c.last; l != nil && l.lastSeq == info.State.LastSeq && l.at.Equal(at) && !now.Before(l.now) && now.Sub(l.now) < etaFresh {
		return l, nil
	}
	recs, err := s.readLog(ctx, at)
	if err != nil {
		return nil, err
	}
	live, err := history.Compact(recs, at)
	if errors.Is(err, history.ErrBeforeHistory) {
		return nil, fail(http.StatusGone, "", "at", err.Error())
	}
	if err != nil {
		return nil, err
	}
	st, err := history.Fold(live, at)
	if err != nil {
		return nil, err
	}
	forward, err := history.Fold(live, at)
	if err != nil {
		return nil, err
	}
	res := eta.Estimates(forward.Engine, eta.Recorded(recs, at), now)
	snap := &etaSnapshot{at: at, now: now, lastSeq: info.State.LastSeq, res: res, byKey: map[string]*etaItem{}}
	// asOf names the log's last event folded (the compacted log is
	// numbered again).
	snap.asOf = &AsOf{}
	if !at.IsZero() {
		snap.asOf.At = &at
	}
	if last := lastFolded(recs, at); last != nil {
		t := last.Event.Time.UTC()
		snap.asOf.Seq, snap.asOf.Time = last.Seq, &t
	}
	var pending []*engine.Workload
	for _, w := range st.Engine.Workloads() {
		if w.Status == engine.Pending {
			pending = append(pending, w)
		}
	}
	slices.SortFunc(pending, func(a, b *engine.Workload) int {
		if c := cmp.Compare(a.Info.ClusterQueue, b.Info.ClusterQueue); c != 0 {
			return c
		}
		if before(a, b) {
			return -1
		}
		return 1
	})
	snap.items = make([]etaItem, 0, len(pending))
	pos := 0
	for i, w := range pending {
		if i > 0 && pending[i-1].Info.ClusterQueue != w.Info.ClusterQueue {
			pos = 0
		}
		snap.items = append(snap.items, etaItem{WorkloadView: view(st, w), Position: pos, ETA: res.Estimates[w.Info.Key]})
		pos++
	}
	for i := range snap.items {
		it := &snap.items[i]
		snap.byKey[api.NamespacedName(it.Namespace, it.Name)] = it
	}
	c.last = snap
	return snap, nil
}

// lastFolded is the last record at or before at (all when zero).
func lastFolded(recs []history.Record, at time.Time) *history.Record {
	var out *history.Record
	for i := range recs {
		if !at.IsZero() && recs[i].Event.Time.After(at) {
			break
		}
		out = &recs[i]
	}
	return out
}

// redacted is an estimate as the caller may see it: the finishes of
// workloads in namespaces it may not read are named "another workload".
func redacted(e *eta.Estimate, visible func(string) bool) *eta.Estimate {
	if e == nil {
		return nil
	}
	out := *e
	out.After = slices.Clone(e.After)
	changed := false
	for i := range out.After {
		if f := &out.After[i]; !visible(f.Namespace) {
			f.Namespace, f.Name, f.Hidden = "", "", true
			changed = true
		}
	}
	if changed && out.WaitSeconds != nil {
		out.Assumption = eta.Assumption(out.After, out.AfterCount, *out.WaitSeconds)
	}
	return &out
}

// pendingETAs is GET /v1/eta: the pending workloads the caller may list,
// in ClusterQueue order then position, with reason and ETA; filtered by
// namespace, clusterQueue and localQueue, paged by limit and offset.
func (s *Server) pendingETAs(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	ns, cq, lq := q.Get("namespace"), q.Get("clusterQueue"), q.Get("localQueue")
	limit, err := intParam(q.Get("limit"), "limit", 100, 1, 1000)
	if err != nil {
		return 0, nil, err
	}
	offset, err := intParam(q.Get("offset"), "offset", 0, 0, MaxETAOffset)
	if err != nil {
		return 0, nil, err
	}
	for field, v := range map[string]string{"namespace": ns, "clusterQueue": cq, "localQueue": lq} {
		if len(v) > 253 {
			return 0, nil, fail(http.StatusBadRequest, "", field, "longer than 253 characters")
		}
	}
	list := rbac.Attributes{Verb: "list", APIGroup: groupKueue, Resource: "workloads", Namespace: ns}
	var allowed map[string]bool
	if ns != "" {
		if err := s.authorize(r, list); err != nil {
			return 0, nil, err
		}
	} else {
		nss, err := s.visibleNamespaces(r, list)
		if err != nil {
			return 0, nil, err
		}
		if nss != nil {
			allowed = map[string]bool{}
			for _, n := range nss {
				allowed[n] = true
			}
		}
	}
	at, err := s.pointInTime(r)
	if err != nil {
		return 0, nil, err
	}
	snap, err := s.etas(r.Context(), at)
	if err != nil {
		return 0, nil, err
	}
	visible := s.mayRead(r)
	items := []etaItem{}
	total := 0
	for i := range snap.items {
		it := &snap.items[i]
		switch {
		case ns != "" && it.Namespace != ns,
			allowed != nil && !allowed[it.Namespace],
			cq != "" && it.ClusterQueue != cq,
			lq != "" && it.LocalQueue != lq:
			continue
		}
		if total >= offset && len(items) < limit {
			v := *it
			v.ETA = redacted(it.ETA, visible)
			items = append(items, v)
		}
		total++
	}
	return http.StatusOK, map[string]any{"items": items, "total": total, "offset": offset, "now": snap.now,
		"asOf": snap.asOf, "steps": snap.res.Steps, "truncated": snap.res.Truncated, "unknownRuns": snap.res.UnknownRuns}, nil
}

func intParam(v, field string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fail(http.StatusBadRequest, "", field, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return n, nil
}

// withETA adds each pending item's estimate to a page of workloads
// (GET /v1/workloads?eta=true).
func (s *Server) withETA(r *http.Request, items []store.WorkloadView, at time.Time) ([]any, error) {
	snap, err := s.etas(r.Context(), at)
	if err != nil {
		return nil, err
	}
	visible := s.mayRead(r)
	out := make([]any, 0, len(items))
	for _, v := range items {
		it := snap.byKey[api.NamespacedName(v.Namespace, v.Name)]
		if v.Status != string(engine.Pending) || it == nil {
			out = append(out, v)
			continue
		}
		out = append(out, struct {
			store.WorkloadView
			Position int           `json:"positionInClusterQueue"`
			ETA      *eta.Estimate `json:"eta"`
		}{v, it.Position, redacted(it.ETA, visible)})
	}
	return out, nil
}

// etaOf is a pending workload's estimate for explain, as the caller may
// see it; nil when it is not pending.
func (s *Server) etaOf(r *http.Request, key string, at time.Time) (*eta.Estimate, error) {
	snap, err := s.etas(r.Context(), at)
	if err != nil {
		return nil, err
	}
	it := snap.byKey[key]
	if it == nil {
		return nil, nil
	}
	return redacted(it.ETA, s.mayRead(r)), nil
}
