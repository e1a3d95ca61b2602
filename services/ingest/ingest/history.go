package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/counterfactual"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/store"
)

// Point-in-time answers (?at=) and counterfactuals (?counterfactual=true)
// are computed from JQ_EVENTS itself: the log is read from its first
// sequence to its last as the request begins (a bounded range, at most
// MaxReplayEvents events) and folded into an engine (libs/history), never
// from the projection.

// MaxReplayEvents bounds the events one request reads from JQ_EVENTS.
const MaxReplayEvents = 1_000_000

// replayTimeout bounds the time one request spends reading the log.
const replayTimeout = 60 * time.Second

// foldStopEvery is how many events a fold applies between two questions
// to its stop (heavy.go): an event costs microseconds, a question next to
// nothing.
const foldStopEvery = 256

// readLog reads JQ_EVENTS in order up to its last sequence when the read
// begins, stopping at the first event after upTo (zero: none).
func (s *Server) readLog(ctx context.Context, upTo time.Time) ([]history.Record, error) {
	return s.foldLog(ctx, upTo, nil)
}

// foldLog is readLog handing each record up to upTo to fold as it is
// read (the fold goes on beside the decoding), and stopping when the
// request's context ends.
func (s *Server) foldLog(ctx context.Context, upTo time.Time, fold func(history.Record)) ([]history.Record, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the stream's state: %w", err)
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 || last < first {
		return nil, nil
	}
	if n := last - first + 1; n > MaxReplayEvents {
		return nil, fail(http.StatusUnprocessableEntity, "", "at",
			fmt.Sprintf("the log holds %d events; a point-in-time or counterfactual answer replays at most %d", n, MaxReplayEvents))
	}
	out := make([]history.Record, 0, min(last-first+1, 1<<16))
	stop := s.stopper(ctx, "fold")
	var stopErr error
	err = s.scanLog(ctx, first, last, func(r history.Record) bool {
		if len(out)%foldStopEvery == 0 {
			if stopErr = stop(); stopErr != nil {
				return false
			}
		}
		out = append(out, r)
		// Kept: the first event after upTo tells Fold where the history
		// starts when nothing precedes.
		in := upTo.IsZero() || !r.Event.Time.After(upTo)
		if in && fold != nil {
			fold(r)
		}
		return in
	})
	if err == nil {
		err = stopErr
	}
	return out, err
}

// scanLog hands each event of JQ_EVENTS from sequence from to last, in
// order, to each until it returns false, within replayTimeout. An event
// that does not decode is handed over as a placeholder, skipped by every
// decider, so that the sequence stays whole (see history.Fold).
//
// The events are read and decoded on a goroutine of their own, a batch
// ahead of each: over a long log (the ETA replica's first catch-up, a
// point in time) decoding is about as much work as folding, and the two
// go on side by side.
func (s *Server) scanLog(ctx context.Context, from, last uint64, each func(history.Record) bool) error {
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	if from > last {
		return nil
	}
	cons, err := bus.NewReader(ctx, s.js, events.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return fmt.Errorf("read %s: %w", events.Stream, err)
	}
	defer cons.Close()
	batches := make(chan []history.Record, 2)
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(batches)
		readErr = decodeLog(ctx, cons, last, batches)
	})
	// The reader is done (and the consumer free to close) before this
	// returns, whichever way it returns.
	defer wg.Wait()
	for recs := range batches {
		for _, rec := range recs {
			if !each(rec) {
				cancel()
				return nil
			}
		}
	}
	wg.Wait()
	return readErr
}

// decodeLog reads the events up to last from cons and sends them, decoded,
// a batch at a time; it ends after last, or the last event there is.
func decodeLog(ctx context.Context, cons *bus.Reader, last uint64, out chan<- []history.Record) error {
	var prev time.Time
	for {
		msgs, err := bus.Batch(ctx, cons, 1000, time.Second)
		if err != nil {
			return fmt.Errorf("read %s: %w", events.Stream, err)
		}
		if len(msgs) == 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("read %s: %w", events.Stream, ctx.Err())
			}
			continue
		}
		recs := make([]history.Record, 0, len(msgs))
		done := false
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			seq := meta.Sequence.Stream
			if seq > last {
				done = true
				break
			}
			ev, err := bus.Decode(m)
			if err != nil {
				ev = events.Event{ID: "undecodable", Time: prev}
			}
			prev = ev.Time
			recs = append(recs, history.Record{Seq: seq, Event: ev})
			if seq >= last || meta.NumPending == 0 {
				done = true
				break
			}
		}
		select {
		case out <- recs:
		case <-ctx.Done():
			return fmt.Errorf("read %s: %w", events.Stream, ctx.Err())
		}
		if done {
			return nil
		}
	}
}

// pointInTime parses ?at=: an RFC 3339 time, not in the future.
func (s *Server) pointInTime(r *http.Request) (time.Time, error) {
	v := r.URL.Query().Get("at")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fail(http.StatusBadRequest, "", "at", "must be an RFC 3339 time, e.g. 2026-01-01T10:00:00Z")
	}
	if t.IsZero() {
		// The zero time is how the code says "the present"; taken as
		// given it would answer the present for a time before any log.
		return time.Time{}, fail(http.StatusGone, "", "at", history.ErrBeforeHistory.Error()+": "+v+" is before the log's first event")
	}
	if now := s.cfg.Now(); t.After(now) {
		return time.Time{}, fail(http.StatusBadRequest, "", "at", fmt.Sprintf("%s is in the future (now is %s)",
			t.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano)))
	}
	return t.UTC(), nil
}

// stateAt folds the log up to at; a time the kept log cannot answer is a
// 410 naming the earliest time available.
func (s *Server) stateAt(ctx context.Context, at time.Time) ([]history.Record, *history.State, error) {
	recs, st, _, err := s.stateAtFloor(ctx, at)
	return recs, st, err
}

// stateAtFloor is stateAt, with the purge floor the fold was checked
// against.
//
// The log is folded as it is read (history.FoldKept, its check made once
// the floor is known), and the fold stops when the request's context
// ends.
func (s *Server) stateAtFloor(ctx context.Context, at time.Time) ([]history.Record, *history.State, uint64, error) {
	st := history.New()
	recs, err := s.foldLog(ctx, at, st.Apply)
	if err != nil {
		return nil, nil, 0, err
	}
	// Read after the log: the retention role raises the floor before it
	// purges, so every event missing from what was read is at or below it.
	floor, err := bus.PurgeFloor(ctx, s.js)
	if err != nil {
		return nil, nil, 0, err
	}
	err = history.Kept(recs, at, floor)
	if errors.Is(err, history.ErrBeforeHistory) {
		return nil, nil, 0, fail(http.StatusGone, "", "at", s.purged(ctx, err, floor).Error())
	}
	if err != nil {
		return nil, nil, 0, err
	}
	return recs, st, floor, nil
}

// neverExisted says, without folding the log, that a workload did not
// exist at at: no event of the kept log is on its subject, and the fold
// up to at would be exact (history.Kept) without it. Any doubt (a purged
// log the fold might not reach past the floor, a time before the log)
// answers false, and the fold decides.
func (s *Server) neverExisted(ctx context.Context, ns, name string, at time.Time) (bool, error) {
	_, err := s.stream.GetLastMsgForSubject(ctx, events.WorkloadSubject(ns, name))
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		// Found, or not known.
		return false, nil
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("read the stream's state: %w", err)
	}
	if info.State.Msgs == 0 || at.Before(info.State.FirstTime) {
		return false, nil
	}
	floor, err := bus.PurgeFloor(ctx, s.js)
	if err != nil {
		return false, err
	}
	if floor == 0 {
		// Never purged: the events on its subject are all it ever had.
		return info.State.FirstSeq == 1, nil
	}
	// Purged: only the history of a workload that ended at or below the
	// floor is gone, so one whose fold up to at reaches the floor holds
	// none of it.
	m, err := s.stream.GetMsg(ctx, floor)
	if err != nil {
		return false, nil
	}
	return !m.Time.After(at), nil
}

// purged completes a history.PurgedError whose records (read up to the
// time asked) ended before the floor: the earliest time answerable is
// then found in the rest of the log.
func (s *Server) purged(ctx context.Context, err error, floor uint64) error {
	var pe *history.PurgedError
	if !errors.As(err, &pe) || pe.Known {
		return err
	}
	info, ierr := s.stream.Info(ctx)
	if ierr != nil {
		return err
	}
	var latest time.Time
	if serr := s.scanLog(ctx, info.State.FirstSeq, info.State.LastSeq, func(r history.Record) bool {
		if r.Event.Time.After(latest) {
			latest = r.Event.Time
		}
		if r.Seq >= floor {
			pe.Earliest, pe.Known = latest, true
			return false
		}
		return true
	}); serr != nil {
		return err
	}
	return pe
}

// AsOf says which prefix of the log an answer was computed from.
type AsOf struct {
	At      *time.Time `json:"at,omitempty"`
	Seq     uint64     `json:"seq"`
	Time    *time.Time `json:"time,omitempty"`
	Skipped int        `json:"skipped,omitempty"`
}

func asOf(at time.Time, st *history.State) *AsOf {
	a := &AsOf{Seq: st.Seq, Skipped: st.Skipped}
	if !at.IsZero() {
		a.At = &at
	}
	if !st.Time.IsZero() {
		t := st.Time.UTC()
		a.Time = &t
	}
	return a
}

// historyExplanation is explain's answer with ?at= or ?counterfactual=.
type historyExplanation struct {
	store.Explanation
	AsOf            *AsOf                  `json:"asOf,omitempty"`
	Counterfactuals *counterfactual.Result `json:"counterfactuals,omitempty"`
	// ETA is a pending workload's estimate (libs/eta), unless ?eta=false.
	ETA *eta.Estimate `json:"eta,omitempty"`
}

// explainHistory answers explain at a point in time, with
// counterfactuals, or both.
func (s *Server) explainHistory(r *http.Request) (int, any, error) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	key := api.NamespacedName(ns, name)
	cf := false
	if v := r.URL.Query().Get("counterfactual"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return 0, nil, fail(http.StatusBadRequest, "", "counterfactual", "must be true or false")
		}
		cf = b
	}
	at, err := s.pointInTime(r)
	if err != nil {
		return 0, nil, err
	}
	// The ETA comes with ?eta=true, and with counterfactuals or ?at=
	// unless ?eta=false.
	e := r.URL.Query().Get("eta")
	if e != "" && e != "true" && e != "false" {
		return 0, nil, fail(http.StatusBadRequest, "", "eta", "must be true or false")
	}
	withETA := e == "true" || e != "false" && (cf || !at.IsZero())
	if !cf && at.IsZero() && !withETA {
		// ?counterfactual=false alone: the projection's answer.
		ex, err := s.store.Explain(r.Context(), ns, name)
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil, fail(http.StatusNotFound, "Workload/"+ns+"/"+name, "", "not found")
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, s.visibility(r).explanation(ex), nil
	}
	if !at.IsZero() {
		if none, err := s.neverExisted(r.Context(), ns, name, at); err != nil {
			return 0, nil, err
		} else if none {
			return 0, nil, fail(http.StatusNotFound, "Workload/"+ns+"/"+name, "", "did not exist at "+at.Format(time.RFC3339Nano))
		}
	}
	release, err := s.heavySeat(r)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	code, out, err := s.explainComputed(r, key, at, cf, withETA)
	return code, out, s.heavyError(err)
}

// explainComputed is explainHistory's answer once it holds a heavy seat.
func (s *Server) explainComputed(r *http.Request, key string, at time.Time, cf, withETA bool) (int, any, error) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	// Both the explanation and the counterfactuals come from one state:
	// the log folded up to at, or, at its end, a copy of the state ingest
	// keeps up to date (eta.Replica), which reads only the events since
	// the last request instead of the whole log. The counterfactuals'
	// probes run copies of it.
	var st *history.State
	var build func() (*history.State, error)
	var err error
	if at.IsZero() {
		if build, err = s.presentState(r.Context()); err != nil {
			return 0, nil, err
		}
		if st, err = build(); err != nil {
			return 0, nil, err
		}
	} else {
		_, folded, _, err := s.stateAtFloor(r.Context(), at)
		if err != nil {
			return 0, nil, err
		}
		// folded is this request's own and nothing runs its engine: the
		// explanation reads it, each probe runs a copy (as at the log's
		// end, eta.Replica.Builder), rather than folding the log again.
		st = folded
		base := folded.Engine
		build = func() (*history.State, error) { return folded.With(base.Clone()), nil }
	}
	w := st.Engine.Workload(key)
	if w == nil {
		msg := "not found"
		if !at.IsZero() {
			msg = "did not exist at " + at.Format(time.RFC3339Nano)
		}
		return 0, nil, fail(http.StatusNotFound, "Workload/"+ns+"/"+name, "", msg)
	}
	out := historyExplanation{Explanation: s.explainState(r, st, w), AsOf: asOf(at, st)}
	if withETA && w.Status == engine.Pending {
		if out.ETA, err = s.etaOf(r, key, at); err != nil {
			return 0, nil, err
		}
	}
	if !cf {
		return http.StatusOK, out, nil
	}
	now := at
	if now.IsZero() {
		now = s.cfg.Now().UTC()
	}
	// The probes run on more than one core only with seats nobody waits
	// for (heavy.go).
	extra, release := s.extraSeats(r, counterfactualWorkers-1)
	defer release()
	b := counterfactual.Budget{Stop: s.stopper(r.Context(), "counterfactual"), Workers: 1 + extra}
	var res counterfactual.Result
	if at.IsZero() {
		// st is a copy of the replica's build made, read by now: the
		// search's own first copy.
		res, err = counterfactual.SearchFromWithin(st, build, key, now, b)
	} else {
		// st is read by the explanation: the search makes its own copy.
		res, err = counterfactual.SearchWithin(build, key, now, b)
	}
	if err != nil {
		return 0, nil, err
	}
	s.visibility(r).counterfactuals(&res, key, w.Info.ClusterQueue)
	out.Counterfactuals = &res
	return http.StatusOK, out, nil
}

// mayRead says whether the caller may read a namespace's workloads.
func (s *Server) mayRead(r *http.Request) func(string) bool {
	memo := map[string]bool{}
	return func(ns string) bool {
		ok, seen := memo[ns]
		if !seen {
			ok = s.authorize(r, rbac.Attributes{Verb: "get", APIGroup: groupKueue, Resource: "workloads", Namespace: ns}) == nil
			memo[ns] = ok
		}
		return ok
	}
}

// view renders an engine workload as the projection does.
func view(st *history.State, w *engine.Workload) store.WorkloadView {
	v := store.WorkloadView{Namespace: w.Object.Namespace, Name: w.Object.Name, UID: string(w.Object.UID),
		LocalQueue: w.Object.Spec.QueueName, ClusterQueue: w.Info.ClusterQueue, Priority: w.Info.Priority,
		Status: string(w.Status), CreatedAt: w.Info.Created.UTC(), Evictions: int32(min(w.Evictions, 1<<31-1))}
	if r, ok := st.Reasons[w.Info.Key]; ok {
		v.Reason, v.Message = r.Token, r.Message
	}
	a := w.Admission
	if a != nil {
		t := w.AdmittedAt.UTC()
		v.AdmittedAt = &t
	} else if w.Status == engine.Finished {
		// Its status.admission stays, as the projection shows it.
		a = st.Kept[w.Info.Key]
	}
	if a != nil {
		v.ClusterQueue = a.ClusterQueue
		v.Assignment, v.PodCounts = map[string]map[string]string{}, map[string]int32{}
		for _, ps := range a.PodSets {
			fl := map[string]string{}
			for r, f := range ps.Flavors {
				fl[string(r)] = f
			}
			v.Assignment[ps.Name] = fl
			v.PodCounts[ps.Name] = ps.Count
		}
	}
	return v
}

// explainState is explain's answer from a folded state: the reason, and
// the pending workloads of its ClusterQueue ordered before it, redacted
// as the projection's answer is (redact.go).
func (s *Server) explainState(r *http.Request, st *history.State, w *engine.Workload) store.Explanation {
	ex := store.Explanation{WorkloadView: view(st, w), Ahead: []string{}}
	if r := st.Reasons[w.Info.Key]; r.Detail != nil {
		d := *r.Detail
		ex.Detail = &d
	}
	if w.Status != engine.Pending || w.Info.ClusterQueue == "" {
		return ex
	}
	var ahead []*engine.Workload
	for _, o := range st.Engine.Workloads() {
		if o.Status == engine.Pending && o.Info.ClusterQueue == w.Info.ClusterQueue && before(o, w) {
			ahead = append(ahead, o)
		}
	}
	slices.SortFunc(ahead, func(a, b *engine.Workload) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	ex.AheadCount = len(ahead)
	for _, o := range ahead[:min(len(ahead), 50)] {
		ex.Ahead = append(ex.Ahead, o.Info.Key)
	}
	return s.visibility(r).explanation(ex)
}

// before is the pending order explain uses: priority, then creation,
// then namespace/name.
func before(a, b *engine.Workload) bool {
	if a.Info.Priority != b.Info.Priority {
		return a.Info.Priority > b.Info.Priority
	}
	if !a.Info.Created.Equal(b.Info.Created) {
		return a.Info.Created.Before(b.Info.Created)
	}
	return a.Info.Key < b.Info.Key
}

// listAt is GET /v1/workloads?at=: the same filters and paging, from the
// log folded up to at. The cursor is the last key of the page.
func (s *Server) listAt(r *http.Request, f store.Filter, at time.Time) (int, any, error) {
	release, err := s.heavySeat(r)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	_, st, err := s.stateAt(r.Context(), at)
	if err != nil {
		return 0, nil, s.heavyError(err)
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	allowed := map[string]bool{}
	for _, ns := range f.Namespaces {
		allowed[ns] = true
	}
	var keys []string
	for k, w := range st.Engine.Workloads() {
		v := view(st, w)
		switch {
		case f.Namespace != "" && v.Namespace != f.Namespace,
			f.Namespaces != nil && !allowed[v.Namespace],
			f.LocalQueue != "" && v.LocalQueue != f.LocalQueue,
			f.ClusterQueue != "" && v.ClusterQueue != f.ClusterQueue,
			f.Status != "" && v.Status != f.Status,
			f.After != "" && k <= f.After:
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	next := ""
	if len(keys) > f.Limit {
		keys = keys[:f.Limit]
		next = keys[len(keys)-1]
	}
	items := make([]store.WorkloadView, 0, len(keys))
	for _, k := range keys {
		items = append(items, view(st, st.Engine.Workload(k)))
	}
	return http.StatusOK, map[string]any{"items": items, "next": next, "asOf": asOf(at, st)}, nil
}

// clusterQueuesAt is GET /v1/clusterqueues[/{name}]?at=.
func (s *Server) clusterQueuesAt(r *http.Request, name string, at time.Time) (int, any, error) {
	release, err := s.heavySeat(r)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	_, st, err := s.stateAt(r.Context(), at)
	if err != nil {
		return 0, nil, s.heavyError(err)
	}
	type summary struct {
		store.ClusterQueueSummary
		AsOf *AsOf `json:"asOf"`
	}
	var out []summary
	for _, n := range sortedNames(st.ClusterQueues) {
		if name != "" && n != name {
			continue
		}
		cq := st.ClusterQueues[n]
		spec, err := json.Marshal(cq.Spec)
		if err != nil {
			return 0, nil, err
		}
		c := store.ClusterQueueSummary{Name: n, Spec: spec, Usage: []store.Usage{}}
		used := quota.Usage{}
		for _, w := range st.Engine.Workloads() {
			switch {
			case w.Status == engine.Admitted && w.Admission.ClusterQueue == n:
				c.Admitted++
				used.Add(w.Admission.Usage)
			case w.Status == engine.Pending && w.Info.ClusterQueue == n:
				c.Pending++
			}
		}
		nominal := map[quota.FlavorResource]int64{}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, res := range f.Resources {
					nominal[quota.FlavorResource{Flavor: f.Name, Resource: res.Name}] = quota.Value(res.Name, res.NominalQuota)
				}
			}
		}
		for _, fr := range used.Keys() {
			if used[fr] == 0 {
				continue
			}
			u := store.Usage{Flavor: fr.Flavor, Resource: string(fr.Resource), Used: used[fr], Nominal: nominal[fr]}
			u.Borrowed = max(0, u.Used-u.Nominal)
			c.Usage = append(c.Usage, u)
		}
		out = append(out, summary{ClusterQueueSummary: c, AsOf: asOf(at, st)})
	}
	if name == "" {
		if out == nil {
			out = []summary{}
		}
		return http.StatusOK, map[string]any{"items": out, "asOf": asOf(at, st)}, nil
	}
	if len(out) == 0 {
		return 0, nil, fail(http.StatusNotFound, "ClusterQueue/"+name, "at", "did not exist at "+at.Format(time.RFC3339Nano))
	}
	return http.StatusOK, out[0], nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
