// Package whatif replays recorded history through the decision core with a
// changed configuration, and compares the outcome with what happened. It is
// part of the pure core: no I/O, no clock; the caller reads the log.
//
//	log ──Fold(from)──▶ the state at from ──apply the new config──▶ engine
//	log ──demand──▶ arrivals, priority changes, deletions and withdrawals
//	                at their recorded times; each admitted run finishes
//	                after its recorded run time, and reports PodsReady
//	                after its recorded delay
//	engine + demand ──simulate (from, to]──▶ new admissions, evictions
//	log ──────────────────────────────────▶ old admissions, evictions
//	──▶ per ClusterQueue old against new; the workloads whose admission
//	    moved most
//
// The simulation applies the demand in the log's order (its sequence; a
// finish or PodsReady that falls at its recorded time takes the place of
// the recorded event, one that moved falls in by its time) and runs the
// engine where the admission service ran it: each of its decisions names
// the log position it was decided at (events.DecisionID), so the replay
// decides after the same batch of events, at the run's recorded time.
// An admission the log shows refused and taken back is taken back in the
// replay too (simulation.refused). Where the log records no run, the
// replay decides after a step the log is quiet after (Quiet), unless the
// service was busy writing a run's decisions or decided in a run soon
// after (simulation.runSoon). A victim's run stops where the log has its
// preemption take effect (simulation.preempt). Decisions recorded in the log
// (admissions, preemptions, PodsReady timeouts) are not replayed in the
// simulation: the core makes them again under the new configuration.
// With the configuration unchanged it reproduces the recorded decisions,
// unless the service took some back (a refused publication, a replay of
// the log: docs/history.md).
//
// A name can hold several workloads over the history: retention's
// WorkloadExpired (or a deletion) frees it, and a later submission reuses
// it. Each submission is one incarnation, named in the statistics and the
// demand by its name and the sequence of its WorkloadSubmitted, so that a
// run time or a wait is never taken from another workload of the same
// name. The simulation applies an expiry as the deciders do, to a
// workload finished in the simulation; one whose simulated run is still
// under way at its recorded expiry is removed when it finishes, or when
// its name is submitted again.
package whatif

import (
	"cmp"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// MaxWindow bounds the span of one what-if.
const MaxWindow = 31 * 24 * time.Hour

// MinMove is the least change of a first admission that Moved lists: a
// decision the replay makes where the log records no run of the core is
// made at its event's time, without the service's reaction time
// (milliseconds).
const MinMove = time.Second

// DefaultTop is how many moved workloads a report lists.
const DefaultTop = 10

// Options say what to replay.
type Options struct {
	From, To time.Time
	// Config are the changed objects: each replaces the object of the
	// same kind and name from from on (recorded changes to it in the
	// window are ignored); the others stay as recorded.
	Config []api.Object
	// Top is how many moved workloads to list (DefaultTop if 0).
	Top int
	// Floor is the log's purge floor (bus.PurgeFloor, 0: never purged):
	// retention's gaps at or below it are answered past it
	// (history.Exact).
	Floor uint64
	// Budget bounds the replay (budget.go): its steps, and a stop asked
	// between them.
	Budget
}

// Report is a what-if's answer.
type Report struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Arrivals counts the workloads submitted in the window.
	Arrivals int           `json:"arrivals"`
	Queues   []QueueReport `json:"clusterQueues"`
	// Moved are the workloads whose first admission in the window moved
	// most, by MinMove or more (never admitted counts as moved furthest).
	Moved []Moved `json:"moved"`
	// Steps counts the simulated steps (each a run to quiescence).
	Steps int `json:"steps"`
}

// QueueReport is one ClusterQueue, old against new.
type QueueReport struct {
	ClusterQueue string `json:"clusterQueue"`
	Old          Stats  `json:"old"`
	New          Stats  `json:"new"`
}

// Stats summarise one ClusterQueue over the window.
type Stats struct {
	// Admitted counts workloads admitted at least once in the window.
	Admitted int `json:"admitted"`
	// Waited counts those of them that arrived in the window; the mean
	// and 95th percentile (nearest rank) time from creation to first
	// admission (never below 0) are over them, in seconds.
	Waited          int     `json:"waited"`
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
	P95WaitSeconds  float64 `json:"p95WaitSeconds"`
	// Unadmitted counts arrivals routed here never admitted in the window.
	Unadmitted int `json:"unadmitted"`
	// Usage is the time-averaged usage of each flavor and resource as a
	// percentage of its nominalQuota (borrowing can exceed 100).
	Usage []CellUsage `json:"usage"`
	// Preemptions counts workloads of this queue evicted by preemption.
	Preemptions int `json:"preemptions"`
}

// CellUsage is one flavor and resource's average usage.
type CellUsage struct {
	Flavor   string  `json:"flavor"`
	Resource string  `json:"resource"`
	Percent  float64 `json:"percent"`
}

// Moved is one workload's first admission, old against new.
type Moved struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Hidden is set, and the name left out, for a workload the caller
	// may not read.
	Hidden       bool       `json:"hidden,omitempty"`
	ClusterQueue string     `json:"clusterQueue"`
	Old          *time.Time `json:"old"`
	New          *time.Time `json:"new"`
	// DeltaSeconds is new minus old; absent when either never happened.
	DeltaSeconds *float64 `json:"deltaSeconds,omitempty"`
}

// ErrWindow is a window that cannot be replayed.
var ErrWindow = errors.New("invalid window")

// Run replays the records (stream order, from sequence 1, up to at least
// to) with the changed configuration.
func Run(recs []history.Record, o Options) (Report, error) {
	if !o.To.After(o.From) {
		return Report{}, fmt.Errorf("%w: to %s is not after from %s", ErrWindow, o.To.Format(time.RFC3339), o.From.Format(time.RFC3339))
	}
	if o.To.Sub(o.From) > MaxWindow {
		return Report{}, fmt.Errorf("%w: %s is longer than the longest window, %s", ErrWindow, o.To.Sub(o.From), MaxWindow)
	}
	if o.Top <= 0 {
		o.Top = DefaultTop
	}
	// The state at from and every event of the window must be what the
	// whole log holds: a window that begins before retention's purge
	// floor is refused, naming the earliest from it answers.
	if err := history.Exact(recs, o.From, o.To, o.Floor); err != nil {
		return Report{}, err
	}
	upTo := o.From
	if len(recs) > 0 && recs[0].Seq == 1 && o.From.Before(recs[0].Event.Time) {
		// Before the first event there was nothing: a window that starts
		// before the history starts from the empty state.
		upTo = time.Time{}
	}
	var start *history.State
	var err error
	if upTo.IsZero() {
		start, err = history.Fold(nil, time.Time{})
	} else {
		start, err = foldKept(recs, upTo, o)
	}
	if err != nil {
		return Report{}, err
	}
	var window []history.Record
	for _, r := range recs {
		if r.Event.Time.After(o.From) && !r.Event.Time.After(o.To) && events.CheckSource(r.Event) == nil {
			window = append(window, r)
		}
	}
	d := demandOf(recs, o.To)
	subs := submissions(recs, upTo)
	// Usage is measured against the last spec of each queue in the
	// window: as recorded, and with the changed objects.
	oldCQs := map[string]*api.ClusterQueue{}
	for k, v := range start.ClusterQueues {
		oldCQs[k] = v
	}
	for _, r := range window {
		if x, ok := r.Event.Data.(*events.ConfigAppliedData); ok && x.Kind == api.KindClusterQueue {
			var cq api.ClusterQueue
			if json.Unmarshal(x.Object, &cq) == nil {
				oldCQs[cq.Name] = &cq
			}
		}
	}
	old := observeLog(start, window, subs, o)
	sim, err := simulate(start, window, d, subs, o)
	if err != nil {
		return Report{}, err
	}
	newCQs := map[string]*api.ClusterQueue{}
	for k, v := range oldCQs {
		newCQs[k] = v
	}
	for _, obj := range o.Config {
		if cq, ok := obj.(*api.ClusterQueue); ok {
			newCQs[cq.Name] = cq
		}
	}
	rep := Report{From: o.From, To: o.To, Arrivals: len(old.created), Steps: sim.steps}
	names := map[string]bool{}
	for n := range old.queues() {
		names[n] = true
	}
	for n := range sim.tr.queues() {
		names[n] = true
	}
	for n := range oldCQs {
		names[n] = true
	}
	for n := range newCQs {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		rep.Queues = append(rep.Queues, QueueReport{ClusterQueue: n, Old: old.stats(n, oldCQs[n], o), New: sim.tr.stats(n, newCQs[n], o)})
	}
	rep.Moved = moved(old, sim.tr, o.Top)
	return rep, nil
}

// demand is what the log says of each workload's run, independent of
// when it was admitted.
type demand struct {
	// run is the recorded run time of a workload's last run that
	// finished; ready the delay from an admission to PodsReady.
	run, ready map[string]time.Duration
	// finishSeq and readySeq are the sequences of those events, which
	// order a replayed finish among events of the same instant.
	finishSeq, readySeq map[string]uint64
	// withdrawn are the finish events of workloads that held no quota
	// then: they are replayed at their recorded time.
	withdrawn map[uint64]bool
	// preempted are the recorded evictions by preemption of each
	// workload, in the log's order, and requested the sequence of each
	// recorded preemption request, by preemptor and decision time: where
	// the log has a preemption take effect (simulation.preempt).
	preempted map[string][]logged
	requested map[logged]request
	// cut are the lengths of each workload's recorded runs that ended in
	// an eviction, in order: a run the log shows lasting that long
	// without finishing does not finish sooner in the replay.
	cut map[string][]time.Duration
}

// request is a recorded preemption request: its sequence and victims.
type request struct {
	seq     uint64
	victims map[string]bool
}

// logged is an event of the log: its time and sequence, or, as a key of
// requested, a workload and a decision's time.
type logged struct {
	key string
	at  int64 // UnixNano
	seq uint64
}

func demandOf(recs []history.Record, to time.Time) demand {
	d := demand{run: map[string]time.Duration{}, ready: map[string]time.Duration{},
		finishSeq: map[string]uint64{}, readySeq: map[string]uint64{}, withdrawn: map[uint64]bool{},
		preempted: map[string][]logged{}, requested: map[logged]request{}, cut: map[string][]time.Duration{}}
	admitted := map[string]time.Time{}
	cur := map[string]uint64{}
	for _, r := range recs {
		ev := r.Event
		if ev.Time.After(to) {
			break
		}
		if events.CheckSource(ev) != nil {
			continue
		}
		switch x := ev.Data.(type) {
		case *events.WorkloadSubmittedData:
			cur[replay.Key(x.WorkloadRef)] = r.Seq
		case *events.QuotaReservedData:
			if _, ok := admitted[replay.Key(x.WorkloadRef)]; !ok {
				admitted[replay.Key(x.WorkloadRef)] = ev.Time
			}
		case *events.PreemptionRequestedData:
			req := request{seq: r.Seq, victims: map[string]bool{}}
			for _, v := range x.Victims {
				req.victims[replay.Key(v.WorkloadRef)] = true
			}
			d.requested[logged{key: replay.Key(x.WorkloadRef), at: ev.Time.UnixNano()}] = req
		case *events.EvictedData:
			k := replay.Key(x.WorkloadRef)
			id := incarnation(k, cur[k])
			if at, ok := admitted[k]; ok {
				d.cut[id] = append(d.cut[id], ev.Time.Sub(at))
			}
			delete(admitted, k)
			if x.Reason == engine.EvictedByPreemption {
				d.preempted[id] = append(d.preempted[id], logged{at: ev.Time.UnixNano(), seq: r.Seq})
			}
		case *events.WorkloadFinishedData:
			k := replay.Key(x.WorkloadRef)
			if at, ok := admitted[k]; ok {
				id := incarnation(k, cur[k])
				d.run[id], d.finishSeq[id] = ev.Time.Sub(at), r.Seq
				delete(admitted, k)
			} else {
				d.withdrawn[r.Seq] = true
			}
		case *events.WorkloadRef:
			k := replay.Key(*x)
			switch ev.Type {
			case events.WorkloadDeleted, events.Deactivated:
				delete(admitted, k)
			case events.PodsReady:
				if at, ok := admitted[k]; ok {
					if id := incarnation(k, cur[k]); !hasKey(d.ready, id) {
						d.ready[id], d.readySeq[id] = ev.Time.Sub(at), r.Seq
					}
				}
			}
		}
	}
	return d
}

// submissions is the sequence of the last WorkloadSubmitted of each name
// up to upTo (none when zero): the incarnation each workload of the state
// folded up to upTo is.
func submissions(recs []history.Record, upTo time.Time) map[string]uint64 {
	out := map[string]uint64{}
	if upTo.IsZero() {
		return out
	}
	for _, r := range recs {
		if r.Event.Time.After(upTo) {
			break
		}
		if x, ok := r.Event.Data.(*events.WorkloadSubmittedData); ok && events.CheckSource(r.Event) == nil {
			out[replay.Key(x.WorkloadRef)] = r.Seq
		}
	}
	return out
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// incarnation names the workload key submitted at sequence seq ('#'
// appears in no Kubernetes name).
func incarnation(key string, seq uint64) string {
	return key + "#" + strconv.FormatUint(seq, 10)
}

// interval is one admission's hold on quota.
type interval struct {
	cq    string
	usage quota.Usage
	start time.Time
}

// tracker turns admissions and their ends into the statistics. It is
// told workload keys and keeps incarnations (see the top of the file).
type tracker struct {
	// cur is the submission sequence of the workload each key names now.
	cur         map[string]uint64
	from, to    time.Time
	open        map[string]interval
	used        map[string]map[quota.FlavorResource]float64 // quota × seconds
	first       map[string]time.Time
	firstCQ     map[string]string
	created     map[string]time.Time
	routed      map[string]string
	preemptions map[string]int
}

func newTracker(o Options, subs map[string]uint64) *tracker {
	cur := make(map[string]uint64, len(subs))
	for k, v := range subs {
		cur[k] = v
	}
	return &tracker{cur: cur, from: o.From, to: o.To, open: map[string]interval{}, used: map[string]map[quota.FlavorResource]float64{},
		first: map[string]time.Time{}, firstCQ: map[string]string{}, created: map[string]time.Time{},
		routed: map[string]string{}, preemptions: map[string]int{}}
}

// id is the incarnation a key names now.
func (t *tracker) id(key string) string { return incarnation(key, t.cur[key]) }

// submitted notes a new incarnation of key.
func (t *tracker) submitted(key string, seq uint64, created time.Time) {
	t.cur[key] = seq
	t.created[t.id(key)] = created
}

func (t *tracker) admit(key, cq string, u quota.Usage, at time.Time) {
	key = t.id(key)
	if _, ok := t.open[key]; ok {
		return
	}
	t.open[key] = interval{cq: cq, usage: u, start: at}
	if _, ok := t.first[key]; !ok && at.After(t.from) {
		t.first[key], t.firstCQ[key] = at, cq
	}
}

func (t *tracker) end(key string, at time.Time) (string, bool) {
	return t.endID(t.id(key), at)
}

func (t *tracker) endID(key string, at time.Time) (string, bool) {
	iv, ok := t.open[key]
	if !ok {
		return "", false
	}
	delete(t.open, key)
	secs := at.Sub(iv.start).Seconds()
	if t.used[iv.cq] == nil {
		t.used[iv.cq] = map[quota.FlavorResource]float64{}
	}
	for fr, v := range iv.usage {
		t.used[iv.cq][fr] += float64(v) * secs
	}
	return iv.cq, true
}

func (t *tracker) close() {
	for _, k := range sortedKeys(t.open) {
		t.endID(k, t.to)
	}
}

func (t *tracker) queues() map[string]bool {
	out := map[string]bool{}
	for _, cq := range t.firstCQ {
		out[cq] = true
	}
	for cq := range t.used {
		out[cq] = true
	}
	for _, cq := range t.routed {
		if cq != "" {
			out[cq] = true
		}
	}
	return out
}

func (t *tracker) stats(name string, spec *api.ClusterQueue, o Options) Stats {
	s := Stats{Usage: []CellUsage{}, Preemptions: t.preemptions[name]}
	var waits []time.Duration
	for k, cq := range t.firstCQ {
		if cq != name {
			continue
		}
		s.Admitted++
		if c, ok := t.created[k]; ok {
			// Admitted within the instant it was created (a creation
			// time is the clock plus up to a few ms): no wait.
			waits = append(waits, max(0, t.first[k].Sub(c)))
		}
	}
	for k, cq := range t.routed {
		if _, ok := t.first[k]; !ok && cq == name {
			s.Unadmitted++
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		var sum float64
		for _, w := range waits {
			sum += w.Seconds()
		}
		s.Waited = len(waits)
		s.MeanWaitSeconds = round(sum / float64(len(waits)))
		s.P95WaitSeconds = round(waits[int(math.Ceil(0.95*float64(len(waits))))-1].Seconds())
	}
	nominal := map[quota.FlavorResource]int64{}
	if spec != nil {
		for _, rg := range spec.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					nominal[quota.FlavorResource{Flavor: f.Name, Resource: r.Name}] = quota.Value(r.Name, r.NominalQuota)
				}
			}
		}
	}
	span := o.To.Sub(o.From).Seconds()
	cells := map[quota.FlavorResource]bool{}
	for fr := range nominal {
		cells[fr] = true
	}
	for fr := range t.used[name] {
		cells[fr] = true
	}
	for _, fr := range sortedCells(cells) {
		n := nominal[fr]
		pct := 0.0
		if n > 0 {
			pct = round(100 * t.used[name][fr] / (float64(n) * span))
		} else if t.used[name][fr] > 0 {
			pct = math.Inf(1)
		}
		if math.IsInf(pct, 0) {
			pct = -1 // used without nominal quota (borrowed only)
		}
		s.Usage = append(s.Usage, CellUsage{Flavor: fr.Flavor, Resource: string(fr.Resource), Percent: pct})
	}
	return s
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// seedOpen opens an interval at from for every workload admitted then.
func (t *tracker) seedOpen(e *engine.Engine) {
	for _, k := range sortedKeys(e.Workloads()) {
		w := e.Workload(k)
		if w.Status == engine.Admitted {
			t.open[t.id(k)] = interval{cq: w.Admission.ClusterQueue, usage: w.Admission.TotalUsage(), start: t.from}
		}
	}
}

// observeLog is the old side: what the log records in the window.
func observeLog(start *history.State, window []history.Record, subs map[string]uint64, o Options) *tracker {
	t := newTracker(o, subs)
	t.seedOpen(start.Engine)
	// The routed queue of each arrival: folded to the end of the window.
	lqs := localQueues(start)
	for _, r := range window {
		ev := r.Event
		switch x := ev.Data.(type) {
		case *events.ConfigAppliedData:
			noteLocalQueue(lqs, x)
		case *events.WorkloadSubmittedData:
			k := replay.Key(x.WorkloadRef)
			t.submitted(k, r.Seq, x.CreatedAt)
			t.routed[t.id(k)] = lqs[api.NamespacedName(x.Namespace, queueName(x.Workload))]
		case *events.QuotaReservedData:
			t.admit(replay.Key(x.WorkloadRef), x.Admission.ClusterQueue, x.Admission.TotalUsage(), ev.Time)
		case *events.EvictedData:
			if cq, ok := t.end(replay.Key(x.WorkloadRef), ev.Time); ok && x.Reason == engine.EvictedByPreemption {
				t.preemptions[cq]++
			}
		case *events.WorkloadFinishedData:
			t.end(replay.Key(x.WorkloadRef), ev.Time)
		case *events.WorkloadRef:
			if ev.Type == events.WorkloadDeleted || ev.Type == events.Deactivated {
				t.end(replay.Key(*x), ev.Time)
			}
		}
	}
	t.close()
	return t
}

// localQueues maps each LocalQueue (namespace/name) to its ClusterQueue,
// from the objects folded so far.
func localQueues(st *history.State) map[string]string {
	out := map[string]string{}
	for k, cq := range st.LocalQueues {
		out[k] = cq
	}
	return out
}

func noteLocalQueue(lqs map[string]string, x *events.ConfigAppliedData) {
	if x.Kind != api.KindLocalQueue {
		return
	}
	var lq api.LocalQueue
	if json.Unmarshal(x.Object, &lq) == nil {
		lqs[api.NamespacedName(x.Namespace, x.Name)] = lq.Spec.ClusterQueue
	}
}

// step is one thing the simulation applies at an instant.
type step struct {
	// at is when it happens; order, then seq, order the steps: the
	// log's order for what the log records (logTimes), at for a finish
	// or PodsReady that moved off its recorded time.
	at, order time.Time
	seq       uint64
	// placed: the step stands where the log has the event at seq.
	placed bool
	// ev is a recorded event replayed as is; otherwise key, gen and kind
	// say what happens to one admission (gen) of a workload.
	ev  *events.Event
	key string
	gen int
	// kind: 'f' it finishes, 'r' it reports PodsReady, 'e' its eviction
	// by a preemption takes effect; 'd' is a run of the core the log
	// records at seq (admission had read the log up to seq then).
	kind byte
}

type steps []step

func (h steps) Len() int { return len(h) }
func (h steps) Less(i, j int) bool {
	if c := h[i].order.Compare(h[j].order); c != 0 {
		return c < 0
	}
	if h[i].seq != h[j].seq {
		return h[i].seq < h[j].seq
	}
	// A run of the core comes after the event it was decided at.
	return h[i].kind != 'd' && h[j].kind == 'd'
}
func (h steps) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *steps) Push(x any)   { *h = append(*h, x.(step)) }
func (h *steps) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type simulation struct {
	eng *engine.Engine
	tr  *tracker
	d   demand
	// expire are the workloads the log expired while their simulated
	// run was still under way: removed when it ends.
	expire map[string]bool
	// inflight are the victims of a preemption not yet evicted, by the
	// run (gen) preempted: see preempt.
	inflight map[string]int
	// usedEvictions counts, by incarnation, the recorded evictions by
	// preemption a replayed preemption has matched.
	usedEvictions map[string]int
	// runEnd is the last decision the log has of the run of the core
	// being replayed (0: the replay's own run), and run what the log has
	// of each of its decisions, by index in the run (decided); written
	// holds them for every run.
	runEnd  uint64
	run     []recorded
	written map[uint64][]recorded
	// reaction is the longest the log shows admission take from the
	// last event it read to deciding.
	reaction time.Duration
	// admissions counts each incarnation's admissions in the replay.
	admissions map[string]int
	// logEvicts are the victims in flight whose eviction the log has:
	// their run was evicted, not finished.
	logEvicts map[string]bool
	// The steps, merged in order: the recorded events and runs of the
	// core (each in the log's order already), and the queue of what the
	// replay schedules.
	recorded, runs []step
	queue          steps
	log            logTimes
	busy           spans
	gen            map[string]int
	steps          int
	to             time.Time
}

// simulate is the new side.
func simulate(start *history.State, window []history.Record, d demand, subs map[string]uint64, o Options) (*simulation, error) {
	s := &simulation{eng: start.Engine, tr: newTracker(o, subs), d: d, gen: map[string]int{}, to: o.To, expire: map[string]bool{},
		inflight: map[string]int{}, usedEvictions: map[string]int{}, admissions: map[string]int{}, logEvicts: map[string]bool{},
		written: map[uint64][]recorded{}}
	s.tr.seedOpen(s.eng)
	s.eng.RecordDecisions()
	overridden := map[string]bool{}
	for _, obj := range o.Config {
		overridden[configKey(obj)] = true
		if _, err := s.eng.Apply(obj, o.From); err != nil {
			return nil, fmt.Errorf("%s: %w", api.ObjectRef(obj), err)
		}
	}
	// The runs under way at from finish after their recorded run time.
	for _, k := range sortedKeys(s.eng.Workloads()) {
		if w := s.eng.Workload(k); w.Status == engine.Admitted {
			s.gen[k]++
			id := s.tr.id(k)
			ready, seq := s.d.ready[id], s.d.readySeq[id]
			if w.PodsReady {
				delete(s.d.ready, id) // already reported
			}
			s.schedule(k, w.AdmittedAt)
			if w.PodsReady {
				s.d.ready[id], s.d.readySeq[id] = ready, seq
			}
		}
	}
	s.settle(o.From)
	s.log = newLogTimes(window)
	// The runs of the core, by the position each decided at, and the
	// last of its decisions written: the service is busy from one to the
	// other.
	runs := map[uint64]uint64{}
	for i := range window {
		r := &window[i]
		if s.replays(r, overridden) {
			s.recorded = append(s.recorded, step{at: r.Event.Time, order: s.log.times[i], seq: r.Seq, placed: true, ev: &r.Event})
		}
		// Where the admission service ran the core, as its decisions
		// record: the replay runs it there too (one step per run).
		if at, n, ok := events.DecisionOf(r.Event); ok {
			if _, seen := runs[at]; !seen {
				s.runs = append(s.runs, step{at: r.Event.Time, order: s.log.upTo(at, o.From), seq: at, kind: 'd'})
			}
			runs[at] = max(runs[at], r.Seq)
			// A run has fewer decisions than the window has events: an
			// index past that (a forged id) is not kept, and nothing is
			// allocated for it.
			if w := s.written[at]; n < len(window) {
				for len(w) <= n {
					w = append(w, recorded{})
				}
				w[n] = recordedOf(r.Event)
				s.written[at] = w
			}
			s.reaction = max(s.reaction, r.Event.Time.Sub(s.log.upTo(at, o.From)))
		}
	}
	// In the log's order, as the recorded events are.
	slices.SortFunc(s.runs, func(a, b step) int { return cmp.Compare(a.seq, b.seq) })
	s.busy = busySpans(runs, s.log, o.From)
	for {
		if err := s.within(o.Budget); err != nil {
			return nil, err
		}
		// A timer due before the next step (or at its instant) fires
		// first, at its own instant; what it admits may schedule steps
		// before the one that was next.
		until := o.To
		if next, ok := s.peek(); ok {
			until = next.order
		}
		if s.fireTimer(until) {
			continue
		}
		next, ok := s.pop()
		if !ok {
			break
		}
		if next.kind == 'd' {
			s.runEnd, s.run = runs[next.seq], s.written[next.seq]
			s.settle(next.at)
			s.runEnd, s.run = 0, nil
			continue
		}
		changed := s.apply(next)
		// After the log's last run of the core, or where the log ran it
		// and decided nothing (so recorded no run), the service decides
		// once nothing else arrives: a quiet spell decides here.
		if after, ok := s.peek(); changed && (!ok || after.order.Sub(next.order) > Quiet) && !s.busy.holds(next) && !s.runSoon(next) {
			s.settle(next.at)
		}
	}
	if err := s.within(Budget{MaxSteps: o.MaxSteps}); err != nil {
		return nil, err
	}
	s.tr.close()
	return s, nil
}

// peek is the next step, if any.
func (s *simulation) peek() (step, bool) {
	next, from := s.first()
	if from < 0 {
		return step{}, false
	}
	return next, true
}

// pop takes the next step, if any.
func (s *simulation) pop() (step, bool) {
	next, from := s.first()
	switch from {
	case 0:
		s.recorded = s.recorded[1:]
	case 1:
		s.runs = s.runs[1:]
	case 2:
		heap.Pop(&s.queue)
	default:
		return step{}, false
	}
	return next, true
}

// first is the earliest of the three heads and where it is (-1: none).
func (s *simulation) first() (step, int) {
	var best step
	from := -1
	for i, h := range [...][]step{s.recorded, s.runs, s.queue} {
		if len(h) > 0 && (from < 0 || steps{h[0], best}.Less(0, 1)) {
			best, from = h[0], i
		}
	}
	return best, from
}

// runSoon says whether the log has admission decide after a recorded
// step within its longest reaction: it read the step and decided then,
// and the replay decides there too, not on the quiet before.
func (s *simulation) runSoon(st step) bool {
	return st.placed && len(s.runs) > 0 && !s.runs[0].at.After(st.at.Add(s.reaction))
}

// Quiet is how long the log must stay quiet after a step for the replay to
// run the core there when the log records no run: the admission service
// reads what arrives together in one batch and decides after it (its
// reaction is a millisecond or two), so events closer than this are
// decided together. A run the log records is replayed where it was.
const Quiet = 10 * time.Millisecond

// spans are the stretches of the log, sorted and apart, in which the
// admission service was busy: from the position a run of the core
// decided at to its last decision written. What arrives then waits for
// the run's decisions to go out and is decided in the next run, however
// quiet the log is after it.
type spans []span

// span is one stretch, by sequence and by the log's clock.
type span struct {
	fromSeq, toSeq uint64
	from, to       time.Time
}

func busySpans(runs map[uint64]uint64, l logTimes, floor time.Time) spans {
	var out spans
	for _, at := range slices.Sorted(maps.Keys(runs)) {
		sp := span{fromSeq: at, toSeq: runs[at], from: l.upTo(at, floor), to: l.upTo(runs[at], floor)}
		if n := len(out); n > 0 && sp.fromSeq <= out[n-1].toSeq {
			out[n-1].toSeq = max(out[n-1].toSeq, sp.toSeq)
			out[n-1].to = later(out[n-1].to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// holds says whether st falls inside a span, after its start: by its
// position if it stands where the log has it (the log's clock can stand
// still over many events, stamped before a decision stamped late), else
// by its time.
func (ss spans) holds(st step) bool {
	if st.placed {
		i, _ := slices.BinarySearchFunc(ss, st.seq, func(sp span, seq uint64) int { return cmp.Compare(sp.fromSeq, seq) })
		return i > 0 && st.seq <= ss[i-1].toSeq
	}
	i, _ := slices.BinarySearchFunc(ss, st.order, func(sp span, t time.Time) int { return sp.from.Compare(t) })
	return i > 0 && !st.order.After(ss[i-1].to)
}

// logTimes is the log's own clock over the window: each event's time, or
// the latest time before it in the log if that is later. Publishers stamp
// events, so a later sequence can carry an earlier time (by milliseconds,
// more for a decision stamped when its run began); the log's order is
// the sequence. Ordered by this clock, recorded events replay in the
// log's order, and a finish moved off its recorded time falls among them
// by its time.
type logTimes struct {
	seqs  []uint64
	raw   []time.Time
	times []time.Time
}

func newLogTimes(window []history.Record) logTimes {
	l := logTimes{seqs: make([]uint64, len(window)), raw: make([]time.Time, len(window)), times: make([]time.Time, len(window))}
	var last time.Time
	for i, r := range window {
		last = later(last, r.Event.Time)
		l.seqs[i], l.raw[i], l.times[i] = r.Seq, r.Event.Time, last
	}
	return l
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// index is where the window holds seq.
func (l logTimes) index(seq uint64) (int, bool) {
	return slices.BinarySearch(l.seqs, seq)
}

// upTo is the log's clock at seq: that of the last event at or before it
// in the window, or floor if none is.
func (l logTimes) upTo(seq uint64, floor time.Time) time.Time {
	i, ok := l.index(seq)
	if !ok {
		i--
	}
	if i < 0 {
		return floor
	}
	return later(floor, l.times[i])
}

func podsReadyOn(e *engine.Engine) bool {
	c := e.Configuration()
	return c != nil && c.WaitForPodsReady != nil && c.WaitForPodsReady.Enable
}

func configKey(obj api.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if m, err := meta.Accessor(obj); err == nil {
		return kind + "/" + m.GetNamespace() + "/" + m.GetName()
	}
	return kind
}

// replays says whether a recorded event is demand the simulation applies.
func (s *simulation) replays(r *history.Record, overridden map[string]bool) bool {
	switch x := r.Event.Data.(type) {
	case *events.ConfigAppliedData:
		return !overridden[x.Kind+"/"+x.Namespace+"/"+x.Name]
	case *events.ConfigRef:
		return !overridden[x.Kind+"/"+x.Namespace+"/"+x.Name]
	case *events.WorkloadSubmittedData, *events.PriorityChangedData, *events.ActiveChangedData:
		return true
	case *events.WorkloadFinishedData:
		return s.d.withdrawn[r.Seq]
	case *events.WorkloadRef:
		return events.Ends(r.Event.Type)
	}
	return false
}

// schedule queues the finish and PodsReady of the admission at at.
func (s *simulation) schedule(key string, at time.Time) {
	id := s.tr.id(key)
	n := s.admissions[id]
	s.admissions[id]++
	if d, ok := s.d.run[id]; ok {
		if cut := s.d.cut[id]; n < len(cut) && cut[n] >= d {
			d = cut[n] + time.Nanosecond
		}
		if t := at.Add(d); !t.After(s.to) {
			heap.Push(&s.queue, s.replayed(t, s.d.finishSeq[id], key, 'f'))
		}
	}
	if d, ok := s.d.ready[id]; ok {
		if t := at.Add(d); !t.After(s.to) {
			heap.Push(&s.queue, s.replayed(t, s.d.readySeq[id], key, 'r'))
		}
	}
}

// replayed is a finish or PodsReady at at, replaying the event at seq: in
// the log's place of that event if it falls at its recorded time.
func (s *simulation) replayed(at time.Time, seq uint64, key string, kind byte) step {
	st := step{at: at, order: at, seq: seq, key: key, gen: s.gen[key], kind: kind}
	if i, ok := s.log.index(seq); ok && s.log.raw[i].Equal(at) {
		st.order, st.placed = s.log.times[i], true
	}
	return st
}

// apply applies a step and says whether it changed anything.
func (s *simulation) apply(st step) bool {
	if st.ev == nil {
		if gen, ok := s.inflight[st.key]; ok && gen == st.gen {
			switch {
			case st.kind == 'e':
				s.evicted(st.key, st.at)
				return true
			case st.kind == 'f' && !s.logEvicts[st.key]:
				// It finished before its eviction: the run is complete,
				// and the workload is no longer pending.
				s.drop(st.key)
				s.tr.end(st.key, st.at)
				_ = s.eng.Finish(st.key, st.at)
				s.expired(st.key, st.at)
				return true
			}
			return false
		}
		w := s.eng.Workload(st.key)
		if st.kind == 'e' || w == nil || w.Status != engine.Admitted || s.gen[st.key] != st.gen {
			return false // that run was cut short
		}
		if st.kind == 'f' {
			s.tr.end(st.key, st.at)
			_ = s.eng.Finish(st.key, st.at)
			s.expired(st.key, st.at)
		} else {
			_ = s.eng.PodsReady(st.key)
		}
		return true
	}
	ev := *st.ev
	switch x := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		k := replay.Key(x.WorkloadRef)
		if s.eng.Workload(k) != nil {
			// The name was freed in the log (expired or deleted) while
			// the workload holding it here is still under way: it gives
			// way, as its expiry would have once it finished.
			s.drop(k)
			s.tr.end(k, ev.Time)
			_ = s.eng.Delete(k, ev.Time)
			delete(s.expire, k)
		}
		s.tr.submitted(k, st.seq, x.CreatedAt)
		defer func() {
			// Routed by the engine as it submits it.
			if w := s.eng.Workload(k); w != nil {
				s.tr.routed[s.tr.id(k)] = w.Info.ClusterQueue
			}
		}()
	case *events.WorkloadFinishedData:
		k := replay.Key(x.WorkloadRef)
		s.drop(k)
		s.tr.end(k, ev.Time)
		defer s.expired(k, ev.Time)
	case *events.WorkloadRef:
		k := replay.Key(*x)
		if ev.Type == events.WorkloadExpired {
			if w := s.eng.Workload(k); w != nil && w.Status != engine.Finished {
				// Its recorded run ended long ago; the simulated one
				// has not yet: it is removed when it does.
				s.expire[k] = true
				return true
			}
		}
		s.drop(k)
		s.tr.end(k, ev.Time)
	}
	// What cannot be applied is skipped, as the deciders skip it.
	_ = replay.Guard(func() error { return replay.Apply(s.eng, ev) })
	return true
}

// expired removes a workload that has just finished if the log expired
// it earlier, as retention would have once it finished.
func (s *simulation) expired(k string, at time.Time) {
	if s.expire[k] {
		delete(s.expire, k)
		if w := s.eng.Workload(k); w != nil && w.Status == engine.Finished {
			_ = s.eng.Delete(k, at)
		}
	}
}

// queueName reads only spec.queueName of a submitted workload.
func queueName(raw json.RawMessage) string {
	var wl struct {
		Spec struct {
			QueueName string `json:"queueName"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(raw, &wl)
	return wl.Spec.QueueName
}

// settle runs the engine to rest (as admission does) and follows its decisions.
func (s *simulation) settle(at time.Time) {
	s.steps++
	s.eng.RunToRest(at)
	s.follow(at)
}

func (s *simulation) follow(at time.Time) {
	ds := s.eng.DrainDecisions()
	refused := s.refused(ds)
	// Decisions are in the order they happened: a workload admitted and
	// preempted again in one run is closed after it was opened.
	for i, d := range ds {
		switch d.Kind {
		case engine.DecidedAdmission:
			if refused[i] {
				_ = s.eng.Unadmit(d.Key, at)
				continue
			}
			s.evicted(d.Key, at)
			s.gen[d.Key]++
			s.tr.admit(d.Key, d.Admission.ClusterQueue, d.Admission.Usage, at)
			s.schedule(d.Key, at)
		case engine.DecidedPreemption:
			for _, v := range d.Targets {
				s.preempt(d.Key, v.Workload.Key, at)
			}
		case engine.DecidedEviction:
			s.drop(d.Key)
			s.tr.end(d.Key, at)
		}
	}
	// Evictions no decision names (a preemptor gone before its victims
	// were evicted): closed if the workload holds no quota now.
	for _, ev := range s.eng.DrainEvictions() {
		if w := s.eng.Workload(ev.Key); w != nil && w.Status == engine.Admitted {
			continue
		}
		if _, ok := s.inflight[ev.Key]; ok {
			continue
		}
		if cq, ok := s.tr.end(ev.Key, at); ok && ev.Reason == engine.EvictedByPreemption {
			s.tr.preemptions[cq]++
		}
	}
}

// recorded is a decision the log has of a run of the core, at its index
// in the run; kind is empty at an index the log lacks.
type recorded struct {
	kind engine.DecisionKind
	ref  events.WorkloadRef
}

func recordedOf(ev events.Event) recorded {
	switch x := ev.Data.(type) {
	case *events.QuotaReservedData:
		return recorded{engine.DecidedAdmission, x.WorkloadRef}
	case *events.InadmissibleData:
		return recorded{engine.DecidedInadmissible, x.WorkloadRef}
	case *events.PreemptionRequestedData:
		return recorded{engine.DecidedPreemption, x.WorkloadRef}
	case *events.EvictedData:
		return recorded{engine.DecidedEviction, x.WorkloadRef}
	}
	return recorded{}
}

// is says whether d is this recorded decision.
func (r recorded) is(d engine.Decision) bool {
	ns, name := r.ref.Namespace, r.ref.Name
	return d.Kind == r.kind && len(d.Key) == len(ns)+1+len(name) &&
		d.Key[:len(ns)] == ns && d.Key[len(ns)] == '/' && d.Key[len(ns)+1:] == name
}

// refused lists the admissions of a replayed run that the service made
// but could not write (the workload moved meanwhile) and took back: where
// the run is the recorded one, decision for decision by its index in the
// run, an admission the log lacks at its index. A run the replay decides
// otherwise (its own, or under another configuration) keeps every
// decision.
func (s *simulation) refused(ds []engine.Decision) map[int]bool {
	if s.run == nil {
		return nil
	}
	whole := len(ds) == len(s.run)
	for i, w := range s.run {
		if w.kind == "" {
			whole = false
			continue
		}
		if i >= len(ds) || !w.is(ds[i]) {
			return nil
		}
	}
	if whole {
		return nil
	}
	var out map[int]bool
	for i, d := range ds {
		if (i >= len(s.run) || s.run[i].kind == "") && d.Kind == engine.DecidedAdmission {
			if out == nil {
				out = map[int]bool{}
			}
			out[i] = true
		}
	}
	return out
}

// preempt notes that preemptor chose victim at at. The core frees the
// victim's quota at once, as admission's does; its run stops where the
// log has it stop:
//   - at its eviction, stamped with the decision's time (the preemptor
//     evicts at the time decided) but written later;
//   - never, if the log has the request name it but no eviction: it
//     finished before the preemptor evicted it, and its finish ends it;
//   - where the log has the request, if that leaves it out: the service
//     leaves out a victim that finished before it published, so a finish
//     before then ends it;
//   - where the log has the last decision of the run, if it has no such
//     request: the service writes no request whose victims all finished
//     while its run's decisions went out (and the replay's own decision
//     would have gone out by then);
//   - at once, if the log records no run here.
//
// A run that finishes before it stops is complete: it is neither
// preempted nor pending again.
func (s *simulation) preempt(preemptor, victim string, at time.Time) {
	if _, ok := s.inflight[victim]; ok {
		return
	}
	s.inflight[victim] = s.gen[victim]
	// Each recorded eviction stops one preemption: a run can preempt a
	// workload, admit it again and preempt it again, all at one time.
	id := s.tr.id(victim)
	for i := s.usedEvictions[id]; i < len(s.d.preempted[id]); i++ {
		if r := s.d.preempted[id][i]; r.at == at.UnixNano() {
			s.usedEvictions[id] = i + 1
			s.logEvicts[victim] = true
			s.stopAt(victim, at, r.seq)
			return
		}
	}
	req, ok := s.d.requested[logged{key: preemptor, at: at.UnixNano()}]
	switch {
	case ok && req.victims[victim]:
	case ok:
		s.stopAt(victim, at, req.seq)
	case s.runEnd > 0:
		s.stopAt(victim, at, s.runEnd)
	default:
		s.evicted(victim, at)
	}
}

// stopAt queues the eviction of victim, decided at at, where the log has
// the event at seq.
func (s *simulation) stopAt(victim string, at time.Time, seq uint64) {
	i, ok := s.log.index(seq)
	if !ok {
		s.evicted(victim, at)
		return
	}
	heap.Push(&s.queue, step{at: at, order: s.log.times[i], seq: seq, placed: true, key: victim, gen: s.gen[victim], kind: 'e'})
}

// drop forgets an eviction in flight.
func (s *simulation) drop(key string) {
	delete(s.inflight, key)
	delete(s.logEvicts, key)
}

// evicted ends the run of a victim whose eviction was in flight, if one
// was, at at.
func (s *simulation) evicted(key string, at time.Time) {
	if _, ok := s.inflight[key]; !ok {
		return
	}
	s.drop(key)
	if cq, ok := s.tr.end(key, at); ok {
		s.tr.preemptions[cq]++
	}
}

// fireTimer fires the timers of the next instant a PodsReady timer is due
// at, if that is not after until, as the podsready service does, and
// reports whether it did.
func (s *simulation) fireTimer(until time.Time) bool {
	if !podsReadyOn(s.eng) {
		return false
	}
	t, ok := s.eng.NextTimer()
	if !ok || t.After(until) {
		return false
	}
	for _, due := range s.eng.DueTimers(t) {
		if due.Timeout != nil {
			s.tr.end(due.Key, t)
		}
	}
	s.eng.FireTimers(t)
	s.settle(t)
	return true
}

// moved lists the workloads whose first admission moved most.
func moved(old, new *tracker, top int) []Moved {
	keys := map[string]bool{}
	for k := range old.first {
		keys[k] = true
	}
	for k := range new.first {
		keys[k] = true
	}
	var out []Moved
	for _, k := range sortedKeys(keys) {
		o, oOK := old.first[k]
		n, nOK := new.first[k]
		if oOK && nOK && n.Sub(o).Abs() < MinMove {
			continue
		}
		key, _, _ := strings.Cut(k, "#")
		ns, name, _ := strings.Cut(key, "/")
		m := Moved{Namespace: ns, Name: name, ClusterQueue: cmp.Or(new.firstCQ[k], old.firstCQ[k])}
		if oOK {
			m.Old = &o
		}
		if nOK {
			m.New = &n
		}
		if oOK && nOK {
			d := round(n.Sub(o).Seconds())
			m.DeltaSeconds = &d
		}
		out = append(out, m)
	}
	mag := func(m Moved) float64 {
		if m.DeltaSeconds == nil {
			return math.Inf(1)
		}
		return math.Abs(*m.DeltaSeconds)
	}
	slices.SortStableFunc(out, func(a, b Moved) int { return cmp.Compare(mag(b), mag(a)) })
	if len(out) > top {
		out = out[:top]
	}
	return out
}

func sortedCells(m map[quota.FlavorResource]bool) []quota.FlavorResource {
	out := make([]quota.FlavorResource, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b quota.FlavorResource) int { return a.Compare(b) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
