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
// new stream starts the replica again from the first.
//
// A snapshot is the pending workloads with their positions as of one
// prefix of the log, and the start of a simulation from there. One
// snapshot serves every request while the log has not grown, for
// etaFresh of the clock; after that a new one is taken from the same
// replica, reading nothing. The simulation runs only as far as a request
// needs: until the workloads of the page asked for are admitted in it
// (eta.Sim), so the first page of a large backlog costs the simulation up
// to its last workload.
//
// The cache's lock is held to catch the replica up and to take a
// snapshot (a copy of the engine), never while a simulation runs: each
// request runs a simulation of its own, on its own copy, asking its
// context between steps and within its step budget (heavy.go). It takes
// the simulation parked on the snapshot by an earlier request (so that a
// later page goes on from where the last stopped, even one stopped by its
// budget or its client leaving) or, while another request runs that one,
// starts its own; it parks what it ran unless the parked one went
// further. A slow request thus delays no other: a request for an
// estimate another has not reached yet computes it itself.
//
// An estimate at a point in time (?at=) folds the log up to it outside
// the lock, as the other history answers do, and the last such snapshot
// is kept too.

// etaFresh is how long ETAs computed at the log's end are served while
// the log has not grown.
const etaFresh = 10 * time.Second

// MaxETAOffset bounds ?offset= of GET /v1/eta.
const MaxETAOffset = 10_000_000

// etaCache holds the replica and the last snapshots.
type etaCache struct {
	// lock guards what follows, and the snapshots' parked simulations:
	// a channel of one, so that a request waiting for it can leave when
	// its context ends.
	lock chan struct{}
	// replica is the present state folded up to seq, of the stream
	// created at stream; nil before the first request.
	replica *eta.Replica
	seq     uint64
	stream  time.Time
	// read counts the events the replica has read, for tests.
	read uint64
	// last is the last snapshot at the log's end; lastAt the last at a
	// point in time.
	last, lastAt *etaSnapshot
}

// acquire takes the cache's lock, or ends with ctx.
func (c *etaCache) acquire(ctx context.Context) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *etaCache) release() { <-c.lock }

// etaSnapshot is every pending workload, in ClusterQueue order with its
// position, as of one prefix of the log; read-only once made, but for
// parked.
type etaSnapshot struct {
	at, now time.Time
	lastSeq uint64
	asOf    *AsOf
	items   []etaItem
	byKey   map[string]*etaItem
	// start makes a simulation of this state; it may be called on
	// several goroutines at once.
	start func() *eta.Sim
	// parked is the simulation run furthest by a request that ended,
	// nil while a request runs it (under the cache's lock).
	parked *eta.Sim
}

// take hands the simulation parked on snap to one request, or a new one.
func (c *etaCache) take(ctx context.Context, snap *etaSnapshot) (*eta.Sim, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	sim := snap.parked
	snap.parked = nil
	c.release()
	if sim == nil {
		// Outside the lock: a copy of the state, in proportion to it.
		sim = snap.start()
	}
	return sim, nil
}

// park puts a simulation a request has run back on snap, unless the one
// parked meanwhile went further (both start from the same state, so the
// further one has every estimate the other has).
func (c *etaCache) park(snap *etaSnapshot, sim *eta.Sim) {
	// Not bounded by the request's context: parking is a few
	// instructions, and what the request ran is kept for the next.
	c.lock <- struct{}{}
	if snap.parked == nil || sim.Taken() > snap.parked.Taken() {
		snap.parked = sim
	}
	c.release()
}

// etaView is what one request reads of the estimates: the snapshot
// (positions), the estimates of the workloads it picked, and the
// simulation's figures so far.
type etaView struct {
	snap      *etaSnapshot
	est       map[string]*eta.Estimate
	steps     int
	truncated bool
	unknown   int
}

// etaView runs the estimates as of at (zero: the log's end, now) until the
// workloads pick names (from the snapshot) have theirs, within the
// request's step budget and life.
func (s *Server) etaView(ctx context.Context, at time.Time, pick func(*etaSnapshot) []string) (*etaView, error) {
	c := s.etaCache()
	snap, err := s.etaSnapshot(ctx, c, at)
	if err != nil {
		return nil, err
	}
	keys := pick(snap)
	if keys == nil {
		keys = []string{}
	}
	sim, err := c.take(ctx, snap)
	if err != nil {
		return nil, err
	}
	res, err := sim.Within(keys, eta.Budget{Steps: etaSteps(s.heavy().lim.ETAWork, len(snap.items)), Stop: s.stopper(ctx, "eta")})
	// Read before parking: once parked, another request may run it on.
	v := &etaView{snap: snap, est: make(map[string]*eta.Estimate, len(keys)), steps: res.Steps, truncated: res.Truncated, unknown: res.UnknownRuns}
	for _, k := range keys {
		if e := res.Estimates[k]; e != nil {
			cp := *e
			v.est[k] = &cp
		}
	}
	c.park(snap, sim)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// etaSteps is the steps of simulation one request may take over a
// snapshot of pending workloads (HeavyLimits.ETAWork), at least one.
func etaSteps(work, pending int) int {
	return max(1, work/max(1, pending))
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
	if c, ok := etaCaches.Load(s); ok {
		return c.(*etaCache)
	}
	c, _ := etaCaches.LoadOrStore(s, &etaCache{lock: make(chan struct{}, 1)})
	return c.(*etaCache)
}

// etaSnapshot returns the estimates' snapshot as of at (zero: the log's
// end, now).
func (s *Server) etaSnapshot(ctx context.Context, c *etaCache, at time.Time) (*etaSnapshot, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	if !at.IsZero() {
		return s.etasAt(ctx, c, info, at)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	now := s.cfg.Now().UTC()
	if l := c.last; l != nil && l.lastSeq == info.State.LastSeq && !now.Before(l.now) && now.Sub(l.now) < etaFresh {
		return l, nil
	}
	if err := s.catchUp(ctx, c, info); err != nil {
		return nil, err
	}
	st := c.replica.State()
	snap := newETASnapshot(st, time.Time{}, now, info.State.LastSeq)
	snap.start = c.replica.Starter(now)
	snap.asOf = asOf(time.Time{}, st)
	c.last = snap
	return snap, nil
}

// presentState brings the replica to the log's end and returns a builder
// of copies of its state (eta.Replica.Builder).
func (s *Server) presentState(ctx context.Context) (func() (*history.State, error), error) {
	c := s.etaCache()
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	if err := s.catchUp(ctx, c, info); err != nil {
		return nil, err
	}
	return c.replica.Builder()
}

// catchUp brings the replica to the stream's last sequence, reading the
// events after the last one it applied; it starts again from the first
// event when there is no replica yet, the stream is another, or events it
// has not read were removed. Events are applied as they are read: a read
// cut short (the request's context) keeps what it applied for the next.
// The caller holds the cache's lock.
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
	stop := s.stopper(ctx, "fold")
	var stopErr error
	err := s.scanLog(ctx, from, last, func(rec history.Record) bool {
		if c.read%foldStopEvery == 0 {
			if stopErr = stop(); stopErr != nil {
				return false
			}
		}
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
	if stopErr != nil {
		return stopErr
	}
	if gap {
		c.replica, c.seq = eta.NewReplica(), 0
		return s.catchUp(ctx, c, info)
	}
	return nil
}

// etasAt is the snapshot at a point in time, from the log folded up to
// it (outside the cache's lock: two requests for the same new point may
// both fold it).
func (s *Server) etasAt(ctx context.Context, c *etaCache, info *jetstream.StreamInfo, at time.Time) (*etaSnapshot, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	l := c.lastAt
	c.release()
	if l != nil && l.lastSeq == info.State.LastSeq && l.at.Equal(at) {
		return l, nil
	}
	recs, st, err := s.stateAt(ctx, at)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	runs := eta.Recorded(recs, at)
	snap := newETASnapshot(st, at, at, info.State.LastSeq)
	snap.asOf = asOf(at, st)
	// The state is folded for this snapshot alone: each simulation runs
	// a copy of its engine, which none runs itself.
	base := st.Engine
	snap.start = func() *eta.Sim { return eta.Start(base.Clone(), runs, at) }
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	c.lastAt = snap
	c.release()
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
	release, err := s.heavySeat(r)
	if err != nil {
		return 0, nil, err
	}
	defer release()
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
		return 0, nil, s.heavyError(err)
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
	release, err := s.heavySeat(r)
	if err != nil {
		return nil, err
	}
	defer release()
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
		return nil, s.heavyError(err)
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
// see it; nil when it is not pending. The caller holds a heavy seat.
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
