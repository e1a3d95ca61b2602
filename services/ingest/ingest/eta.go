package ingest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/store"
)

// ETAs (libs/eta) of the present start from the state as it is now: a
// replica (eta.Replica) that ingest folds from JQ_EVENTS one event at a
// time, reading only the events after the last one it applied when a
// request comes. The first request after ingest starts reads the log from
// its first event; a gap in the sequence (retention purged past it) or a
// new stream starts the replica again from the first. The simulation runs
// on a copy of the replica's engine, and only as far as a request needs:
// until the workloads of the page asked for are admitted in it (eta.Sim),
// so the first page of a large backlog costs the simulation up to its
// last workload, and a later page goes on from there. One simulation
// serves every request while the log has not grown, for etaFresh of the
// clock; after that a new one starts on the same replica, reading nothing.
//
// An estimate at a point in time (?at=) folds the log up to it, as the
// other history answers do, and the last such computation is kept too.

// etaFresh is how long ETAs computed at the log's end are served while
// the log has not grown.
const etaFresh = 10 * time.Second

// MaxETAOffset bounds ?offset= of GET /v1/eta.
const MaxETAOffset = 10_000_000

// etaCache holds the replica and the last computations.
type etaCache struct {
	mu sync.Mutex
	// replica is the present state folded up to seq, of the stream
	// created at stream; nil before the first request.
	replica *eta.Replica
	seq     uint64
	stream  time.Time
	// read counts the events the replica has read, for tests.
	read uint64
	// last is the last computation at the log's end; lastAt the last at
	// a point in time.
	last, lastAt *etaSnapshot
}

// etaSnapshot is every pending workload, in ClusterQueue order with its
// position and estimate, as of one prefix of the log.
type etaSnapshot struct {
	at, now time.Time
	lastSeq uint64
	asOf    *AsOf
	items   []etaItem
	byKey   map[string]*etaItem
	// sim is run on by each request as far as it needs, under the
	// cache's lock; items hold no estimate (they grow as sim runs).
	sim *eta.Sim
}

// etaView is what one request reads of the estimates, copied under the
// cache's lock: the snapshot (positions), the estimates of the workloads
// it picked, and the simulation's figures so far.
type etaView struct {
	snap      *etaSnapshot
	est       map[string]*eta.Estimate
	steps     int
	truncated bool
	unknown   int
}

// etaView runs the estimates as of at (zero: the log's end, now) until the
// workloads pick names (from the snapshot, under the lock) have theirs.
func (s *Server) etaView(ctx context.Context, at time.Time, pick func(*etaSnapshot) []string) (*etaView, error) {
	c := s.etaCache()
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := s.etasLocked(ctx, c, at)
	if err != nil {
		return nil, err
	}
	keys := pick(snap)
	if keys == nil {
		keys = []string{}
	}
	res := snap.sim.Until(keys)
	v := &etaView{snap: snap, est: make(map[string]*eta.Estimate, len(keys)), steps: res.Steps, truncated: res.Truncated, unknown: res.UnknownRuns}
	for _, k := range keys {
		if e := res.Estimates[k]; e != nil {
			cp := *e
			v.est[k] = &cp
		}
	}
	return v, nil
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

// etasLocked returns the estimates' snapshot as of at (zero: the log's
// end, now); the caller holds c.mu.
func (s *Server) etasLocked(ctx context.Context, c *etaCache, at time.Time) (*etaSnapshot, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	if !at.IsZero() {
		return s.etasAt(ctx, c, info, at)
	}
	now := s.cfg.Now().UTC()
	if l := c.last; l != nil && l.lastSeq == info.State.LastSeq && !now.Before(l.now) && now.Sub(l.now) < etaFresh {
		return l, nil
	}
	if err := s.catchUp(ctx, c, info); err != nil {
		return nil, err
	}
	sim, err := c.replica.Start(now)
	if err != nil {
		return nil, err
	}
	st := c.replica.State()
	snap := newETASnapshot(st, time.Time{}, now, info.State.LastSeq)
	snap.sim = sim
	snap.asOf = asOf(time.Time{}, st)
	c.last = snap
	return snap, nil
}

// presentState brings the replica to the log's end and returns a builder
// of copies of its state (eta.Replica.Builder).
func (s *Server) presentState(ctx context.Context) (func() (*history.State, error), error) {
	c := s.etaCache()
	c.mu.Lock()
	defer c.mu.Unlock()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	if err := s.catchUp(ctx, c, info); err != nil {
		return nil, err
	}
	return c.replica.Builder()
}

// catchUp brings the replica to the stream's last sequence, reading the
// events after the last one it applied; it starts again from the first
// event when there is no replica yet, the stream is another, or events it
// has not read were removed. Events are applied as they are read: a read
// cut short (the request's deadline) keeps what it applied for the next.
func (s *Server) catchUp(ctx context.Context, c *etaCache, info *jetstream.StreamInfo) error {
	first, last := info.State.FirstSeq, info.State.LastSeq
	if c.replica == nil || !c.stream.Equal(info.Created) || c.seq > last || (info.State.Msgs > 0 && first > c.seq+1) {
		c.replica, c.seq, c.stream = eta.NewReplica(), 0, info.Created
	}
	if info.State.Msgs == 0 || c.seq >= last {
		return nil
	}
	from := max(c.seq+1, first)
	if c.seq == 0 {
		from = first
	}
	gap := false
	err := s.scanLog(ctx, from, last, func(rec history.Record) bool {
		c.read++
		if c.seq != 0 && rec.Seq != c.seq+1 {
			// Removed while the replica was behind: what it applied
			// may hold a workload whose end is gone.
			gap = true
			return false
		}
		c.replica.Apply(rec)
		c.seq = rec.Seq
		return true
	})
	if err != nil {
		return err
	}
	if gap {
		c.replica, c.seq = eta.NewReplica(), 0
		return s.catchUp(ctx, c, info)
	}
	return nil
}

// etasAt computes the estimates at a point in time from the log up to it.
func (s *Server) etasAt(ctx context.Context, c *etaCache, info *jetstream.StreamInfo, at time.Time) (*etaSnapshot, error) {
	if l := c.lastAt; l != nil && l.lastSeq == info.State.LastSeq && l.at.Equal(at) {
		return l, nil
	}
	recs, st, err := s.stateAt(ctx, at)
	if err != nil {
		return nil, err
	}
	// The state is folded for this computation alone: the view of its
	// workloads is taken before the simulation moves its engine.
	snap := newETASnapshot(st, at, at, info.State.LastSeq)
	snap.asOf = asOf(at, st)
	snap.sim = eta.Start(st.Engine, eta.Recorded(recs, at), at)
	c.lastAt = snap
	return snap, nil
}

// newETASnapshot lists the pending workloads of st in ClusterQueue order,
// with their positions.
func newETASnapshot(st *history.State, at, now time.Time, lastSeq uint64) *etaSnapshot {
	snap := &etaSnapshot{at: at, now: now, lastSeq: lastSeq}
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
	snap.byKey = make(map[string]*etaItem, len(pending))
	pos := 0
	for i, w := range pending {
		if i > 0 && pending[i-1].Info.ClusterQueue != w.Info.ClusterQueue {
			pos = 0
		}
		snap.items = append(snap.items, etaItem{WorkloadView: view(st, w), Position: pos})
		pos++
	}
	for i := range snap.items {
		it := &snap.items[i]
		snap.byKey[api.NamespacedName(it.Namespace, it.Name)] = it
	}
	return snap
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
	items := []etaItem{}
	total := 0
	v, err := s.etaView(r.Context(), at, func(snap *etaSnapshot) []string {
		var keys []string
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
				items = append(items, *it)
				keys = append(keys, api.NamespacedName(it.Namespace, it.Name))
			}
			total++
		}
		return keys
	})
	if err != nil {
		return 0, nil, err
	}
	vis := s.visibility(r)
	for i := range items {
		items[i].ETA = vis.estimate(v.est[api.NamespacedName(items[i].Namespace, items[i].Name)])
	}
	return http.StatusOK, map[string]any{"items": items, "total": total, "offset": offset, "now": v.snap.now,
		"asOf": v.snap.asOf, "steps": v.steps, "truncated": v.truncated, "unknownRuns": v.unknown}, nil
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
	positions := map[string]int{}
	ev, err := s.etaView(r.Context(), at, func(snap *etaSnapshot) []string {
		var keys []string
		for _, v := range items {
			k := api.NamespacedName(v.Namespace, v.Name)
			if it := snap.byKey[k]; it != nil && v.Status == string(engine.Pending) {
				positions[k] = it.Position
				keys = append(keys, k)
			}
		}
		return keys
	})
	if err != nil {
		return nil, err
	}
	vis := s.visibility(r)
	out := make([]any, 0, len(items))
	for _, v := range items {
		k := api.NamespacedName(v.Namespace, v.Name)
		pos, ok := positions[k]
		if !ok {
			out = append(out, v)
			continue
		}
		out = append(out, struct {
			store.WorkloadView
			Position int           `json:"positionInClusterQueue"`
			ETA      *eta.Estimate `json:"eta"`
		}{v, pos, vis.estimate(ev.est[k])})
	}
	return out, nil
}

// etaOf is a pending workload's estimate for explain, as the caller may
// see it; nil when it is not pending.
func (s *Server) etaOf(r *http.Request, key string, at time.Time) (*eta.Estimate, error) {
	v, err := s.etaView(r.Context(), at, func(snap *etaSnapshot) []string {
		if snap.byKey[key] == nil {
			return nil
		}
		return []string{key}
	})
	if err != nil {
		return nil, err
	}
	e := v.est[key]
	if e == nil {
		return nil, nil
	}
	return s.visibility(r).estimate(e), nil
}
