package engine

// The engine's state as a snapshot: what a restored engine needs to decide
// exactly as the engine it was taken from, given the same events after it.
// Encoding is pure (bytes in, bytes out); storing, versioning on the wire
// and compression belong to libs/snapshot.
//
// What is kept: the configuration objects, every workload with its status
// and its scheduling state (retry state, reasons, requeue state, queue),
// each ClusterQueue's generation, the pending queues (heap and parked
// members, pop counters), the counters that order admissions and settle
// runs to quiescence, and the evictions not yet drained. What is derived
// again on restore: the compiled ClusterQueues and which are inactive, the
// pending index, each queue's admitted set and usage total, each admitted
// workload's preemption record, and the scheduler's view of each workload
// (from its object, then its queue time, ClusterQueue, priority and retry
// state are set). A cycle waiting for PodsReady (blockAdmission) and
// decisions not yet drained cannot be encoded: EncodeSnapshot refuses
// them with ErrNotQuiet, and the caller snapshots at another moment (the
// services snapshot a replay of the log, which never runs a cycle).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/podsready"
	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// SnapshotVersion is the version of the encoding below. A snapshot of
// another version is not decoded: the service replays the log instead.
// Bump it on any change to the encoded types or their meaning.
const SnapshotVersion = 6

// ErrNotQuiet is returned by EncodeSnapshot while the engine holds state
// the encoding does not represent: a cycle waiting for PodsReady, or
// decisions not yet drained.
var ErrNotQuiet = errors.New("the engine is mid-cycle or holds undrained decisions")

// ErrBadSnapshot marks a snapshot that does not decode into a consistent
// engine.
var ErrBadSnapshot = errors.New("bad engine snapshot")

// A snapshot is its head, JSON, then its workloads, binary (snapcodec.go):
//
//	uvarint len(head) · head · uvarint count · count × (uvarint len(record) · record)
//
// The head (configuration, queues, counters) is small and its types are
// many; the workloads are most of the bytes and all of one type.

// snapHead is everything in a snapshot but the workloads.
type snapHead struct {
	Flavors       []*api.ResourceFlavor        `json:"flavors,omitempty"`
	ClusterQueues []*api.ClusterQueue          `json:"clusterQueues,omitempty"`
	LocalQueues   []*api.LocalQueue            `json:"localQueues,omitempty"`
	WPCs          []*api.WorkloadPriorityClass `json:"workloadPriorityClasses,omitempty"`
	PCs           []*api.PriorityClass         `json:"priorityClasses,omitempty"`
	Config        *api.Configuration           `json:"configuration,omitempty"`
	ToDrain       []string                     `json:"toDrain,omitempty"`
	Generations   []snapGeneration             `json:"generations,omitempty"`
	Queues        []snapQueue                  `json:"queues,omitempty"`
	Unparked      []string                     `json:"unparked,omitempty"`
	Evictions     []Eviction                   `json:"evictions,omitempty"`
	Epoch         uint64                       `json:"epoch"`
	Changes       uint64                       `json:"changes"`
	SettledAt     uint64                       `json:"settledAt"`
	Settled       bool                         `json:"settled,omitempty"`
	CutLoop       bool                         `json:"cutLoop,omitempty"`
	TimerSeq      uint64                       `json:"timerSeq,omitempty"`
	EvictedAt     time.Time                    `json:"evictedAt,omitzero"`
	EvictedTick   time.Duration                `json:"evictedTick,omitempty"`
	AdmissionSeq  uint64                       `json:"admissionSeq"`
}

type snapGeneration struct {
	ClusterQueue string `json:"cq"`
	Generation   int64  `json:"gen"`
}

type snapWorkload struct {
	// Object is the workload without its podSets; PodSets, Misconfigured
	// and Adjusted are what the engine derived from them (its Info).
	Object          *api.Workload           `json:"object"`
	PodSets         []scheduler.PodSet      `json:"podSets"`
	Misconfigured   string                  `json:"misconfigured,omitempty"`
	Adjusted        bool                    `json:"adjusted,omitempty"`
	Created         time.Time               `json:"created"`
	QueueTime       time.Time               `json:"queueTime"`
	ClusterQueue    string                  `json:"cq,omitempty"`
	Priority        int32                   `json:"priority"`
	LastTried       *scheduler.TriedFlavors `json:"lastTried,omitempty"`
	Status          Status                  `json:"status"`
	Admission       *snapAdmission          `json:"admission,omitempty"`
	AdmittedAt      time.Time               `json:"admittedAt,omitzero"`
	AdmissionSeq    uint64                  `json:"admissionSeq,omitempty"`
	Reason          *scheduler.Reason       `json:"reason,omitempty"`
	Evictions       int                     `json:"evictions,omitempty"`
	PodsReady       bool                    `json:"podsReady,omitempty"`
	RequeueCount    int32                   `json:"requeueCount,omitempty"`
	RequeueAt       time.Time               `json:"requeueAt,omitzero"`
	QueuedIn        string                  `json:"queuedIn,omitempty"`
	FinishedIn      string                  `json:"finishedIn,omitempty"`
	PublishedReason *scheduler.Reason       `json:"publishedReason,omitempty"`
	CondPending     bool                    `json:"condPending,omitempty"`
	Listed          bool                    `json:"listed,omitempty"`
	EvictedPriority *int32                  `json:"evictedPriority,omitempty"`
	BackoffUpdated  bool                    `json:"backoffUpdated,omitempty"`
	EvictedUnset    bool                    `json:"evictedUnset,omitempty"`
	TimedOut        bool                    `json:"timedOut,omitempty"`
	TimerSeq        uint64                  `json:"timerSeq,omitempty"`
	FinishedQueued  bool                    `json:"finishedQueued,omitempty"`
}

type snapAdmission struct {
	ClusterQueue string                      `json:"clusterQueue"`
	PodSets      []scheduler.PodSetAdmission `json:"podSets"`
	Usage        []snapCell                  `json:"usage"`
}

type snapCell struct {
	Flavor   string `json:"f"`
	Resource string `json:"r"`
	Value    int64  `json:"v"`
}

type snapQueue struct {
	Name     string               `json:"name"`
	Cohort   string               `json:"cohort,omitempty"`
	Strategy api.QueueingStrategy `json:"strategy,omitempty"`
	// Selector is "" for none, "nothing" for labels.Nothing(), else
	// "=" followed by the selector's string form.
	Selector          string   `json:"selector,omitempty"`
	Active            bool     `json:"active,omitempty"`
	PopCycle          int64    `json:"popCycle"`
	InadmissibleCycle int64    `json:"inadmissibleCycle"`
	Heap              []string `json:"heap,omitempty"`
	Parked            []string `json:"parked,omitempty"`
}

// EncodeSnapshot renders the engine's state (see the top of this file).
// It changes nothing.
func (e *Engine) EncodeSnapshot() ([]byte, error) { return e.EncodeSnapshotPaced(nil) }

// restEvery is how many workloads a paced encode or decode handles
// between two rests: about a millisecond of work.
const restEvery = 256

// rested calls rest, if any, after every restEvery-th of n workloads
// handled; i counts from 0.
func rested(rest func() error, i int) error {
	if rest == nil || i%restEvery != restEvery-1 {
		return nil
	}
	return rest()
}

// EncodeSnapshotPaced is EncodeSnapshot calling rest between pieces of
// the work, and giving up with its error: a snapshot written in the
// background while the engine's owner keeps deciding rests there (see
// libs/snapshot's Pacer), so that it takes a share of a core and not a
// whole one for as long as it runs.
func (e *Engine) EncodeSnapshotPaced(rest func() error) ([]byte, error) {
	if e.pass != nil || len(e.decisions) > 0 {
		return nil, ErrNotQuiet
	}
	s := snapHead{Config: e.config, ToDrain: sortedKeys(e.toDrain), Unparked: e.queues.Unparked(),
		Evictions: e.evictions, Epoch: e.epoch, Changes: e.changes, SettledAt: e.settledAt, Settled: e.settled,
		CutLoop: e.cutLoop, TimerSeq: e.timerSeq, EvictedAt: e.evictedAt, EvictedTick: e.evictedTick,
		AdmissionSeq: e.admissionSeq}
	for _, k := range sortedKeys(e.flavors) {
		s.Flavors = append(s.Flavors, e.flavors[k])
	}
	for _, k := range sortedKeys(e.clusterQueues) {
		s.ClusterQueues = append(s.ClusterQueues, e.clusterQueues[k])
	}
	for _, k := range sortedKeys(e.localQueues) {
		s.LocalQueues = append(s.LocalQueues, e.localQueues[k])
	}
	for _, k := range sortedKeys(e.wpcs) {
		s.WPCs = append(s.WPCs, e.wpcs[k])
	}
	for _, k := range sortedKeys(e.pcs) {
		s.PCs = append(s.PCs, e.pcs[k])
	}
	for _, k := range sortedKeys(e.usage) {
		s.Generations = append(s.Generations, snapGeneration{ClusterQueue: k, Generation: e.usage[k].generation})
	}
	for _, st := range e.queues.States() {
		sq := snapQueue{Name: st.Name, Cohort: st.Cohort, Strategy: st.Strategy, Selector: encodeSelector(st.Selector),
			Active: st.Active, PopCycle: st.PopCycle, InadmissibleCycle: st.InadmissibleCycle}
		for _, list := range []struct {
			from []*queue.Entry
			to   *[]string
		}{{st.Heap, &sq.Heap}, {st.Parked, &sq.Parked}} {
			for _, en := range list.from {
				w := e.workloads[en.Workload.Key]
				// The queue must hold the workload's own view, and
				// nothing else, or restoring it would lose something.
				if w == nil || w.Info != en.Workload || !en.NotBefore.IsZero() {
					return nil, fmt.Errorf("queue %s holds %s in a form a snapshot cannot keep", st.Name, en.Workload.Key)
				}
				*list.to = append(*list.to, en.Workload.Key)
			}
		}
		s.Queues = append(s.Queues, sq)
	}
	head, err := json.Marshal(&s)
	if err != nil {
		return nil, err
	}
	// The head, then the records, written where they end up: a record
	// is a few hundred bytes, and a buffer grown by doubling from
	// nothing, then copied behind the head, allocated five times the
	// snapshot's size (on 50,000 workloads).
	keys := sortedKeys(e.workloads)
	recs := snapWriter{b: make([]byte, 0, 2*binary.MaxVarintLen64+len(head)+snapRecordGuess*len(keys))}
	recs.bytes(head)
	var rec snapWriter
	// Equal admissions are one (see shared): each is encoded once.
	adms := map[*scheduler.Admission]*snapAdmission{}
	recs.uvarint(uint64(len(keys)))
	for i, k := range keys {
		if err := rested(rest, i); err != nil {
			return nil, err
		}
		w := e.workloads[k]
		if w.stale != nil {
			// A reissued preemption's copy waits for the timeout's timer
			// (see reissued): a moment the encoding does not keep.
			return nil, ErrNotQuiet
		}
		sw := snapWorkload{Object: w.Object, PodSets: w.Info.PodSets, Misconfigured: w.Info.Misconfigured, Adjusted: w.adjusted, Created: w.Info.Created, QueueTime: w.Info.QueueTime,
			ClusterQueue: w.Info.ClusterQueue, Priority: w.Info.Priority, LastTried: w.Info.LastTried,
			Status: w.Status, AdmittedAt: w.AdmittedAt, AdmissionSeq: w.admissionSeq, Reason: w.Reason,
			Evictions: w.Evictions, PodsReady: w.PodsReady, RequeueCount: w.RequeueCount, RequeueAt: w.RequeueAt,
			QueuedIn: w.queuedIn, FinishedIn: w.finishedIn, PublishedReason: w.publishedReason, CondPending: w.condPending,
			Listed: w.listed, EvictedPriority: w.evictedPriority, BackoffUpdated: w.backoffUpdated, EvictedUnset: w.evictedUnset, TimedOut: w.timedOut, TimerSeq: w.timerSeq,
			FinishedQueued: e.finishedQueued[k] == w}
		if a := w.Admission; a != nil {
			sa := adms[a]
			if sa == nil {
				sa = &snapAdmission{ClusterQueue: a.ClusterQueue, PodSets: a.PodSets}
				for _, fr := range a.Usage.Keys() {
					sa.Usage = append(sa.Usage, snapCell{Flavor: fr.Flavor, Resource: string(fr.Resource), Value: a.Usage[fr]})
				}
				adms[a] = sa
			}
			sw.Admission = sa
		}
		rec.b = rec.b[:0]
		if err := rec.workload(&sw); err != nil {
			return nil, fmt.Errorf("workload %s: %w", k, err)
		}
		recs.bytes(rec.b)
	}
	return recs.b, nil
}

// snapRecordGuess is about the size of a workload's record, which sizes
// the snapshot's buffer up front.
const snapRecordGuess = 384

func encodeSelector(sel labels.Selector) string {
	switch {
	case sel == nil:
		return ""
	case !sel.Empty() && sel.String() == "":
		return "nothing"
	}
	return "=" + sel.String()
}

func decodeSelector(s string) (labels.Selector, error) {
	switch {
	case s == "":
		return nil, nil
	case s == "nothing":
		return labels.Nothing(), nil
	case strings.HasPrefix(s, "="):
		return labels.Parse(s[1:])
	}
	return nil, fmt.Errorf("selector %q", s)
}

// DecodeSnapshot returns the engine a snapshot describes, or an error
// wrapping ErrBadSnapshot. The snapshot is external input: every
// reference in it is checked (each workload's key matches its object, an
// admission exists exactly for an admitted workload, usage adds up
// without overflow, every queued workload is in its queue once and every
// queue entry is a workload queued there), so a snapshot that decodes is
// one the engine could have been in.
func DecodeSnapshot(data []byte) (*Engine, error) { return DecodeSnapshotPaced(data, nil) }

// DecodeSnapshotPaced is DecodeSnapshot calling rest between pieces of
// the work (see EncodeSnapshotPaced), on one CPU: without rest, the
// workloads are decoded on every CPU, as a starting decider wants. An
// error of rest is returned as it is.
func DecodeSnapshotPaced(data []byte, rest func() error) (_ *Engine, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrBadSnapshot, p)
		}
	}()
	r := snapReader{b: data}
	head := r.bytes()
	n := r.count()
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = r.bytes()
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after the last workload", len(r.b)))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, r.err)
	}
	var in snapHead
	if err := json.Unmarshal(head, &in); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	// A rest's error (the caller gave up) is returned as it is: the
	// snapshot is not at fault.
	var stopped error
	if rest != nil {
		paced := rest
		rest = func() error { stopped = paced(); return stopped }
	}
	ws, err := decodeWorkloads(recs, rest)
	if stopped != nil {
		return nil, stopped
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	e, err := in.engine(ws, rest)
	if stopped != nil {
		return nil, stopped
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	return e, nil
}

// decodedWorkload is a workload decoded from a snapshot with the
// scheduler's view derived from its object.
type decodedWorkload struct {
	snapWorkload
	info *scheduler.Workload
}

// decodeWorkloads decodes a snapshot's workloads and derives their
// scheduler views. Without rest it does so on every CPU: each is
// independent of the others, and on a long history they are most of a
// restore. With rest, on this goroutine, resting between pieces.
func decodeWorkloads(raw [][]byte, rest func() error) ([]decodedWorkload, error) {
	out := make([]decodedWorkload, len(raw))
	if rest != nil {
		adms := map[string]*snapAdmission{}
		for i := range raw {
			if err := rested(rest, i); err != nil {
				return nil, err
			}
			if err := decodeRecord(&out[i], raw[i], adms); err != nil {
				return nil, fmt.Errorf("workload %d: %w", i, err)
			}
		}
		return out, nil
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(raw)/1000))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[w] = fmt.Errorf("%v", p)
				}
			}()
			adms := map[string]*snapAdmission{}
			for i := w; i < len(raw); i += workers {
				if err := decodeRecord(&out[i], raw[i], adms); err != nil {
					errs[w] = fmt.Errorf("workload %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// decodeRecord decodes one workload's record into d; adms holds the
// admissions decoded so far by this goroutine.
func decodeRecord(d *decodedWorkload, raw []byte, adms map[string]*snapAdmission) error {
	r := snapReader{b: raw, adms: adms}
	if err := r.workload(&d.snapWorkload); err != nil {
		return err
	}
	if d.Object == nil {
		return fmt.Errorf("a workload without its object")
	}
	// The namespace labels are the engine's shared set, set in order.
	d.info = newInfo(d.Object, api.NamespacedName(d.Object.Namespace, d.Object.Name), d.Created, nil)
	d.info.PodSets, d.info.Misconfigured = d.PodSets, d.Misconfigured
	return nil
}

func (s *snapHead) engine(ws []decodedWorkload, rest func() error) (*Engine, error) {
	e := New()
	// Sized at once: growing a map of a long history rehashes it again and again.
	e.workloads = make(map[string]*Workload, len(ws))
	for _, o := range s.Flavors {
		if o == nil || e.flavors[o.Name] != nil {
			return nil, fmt.Errorf("ResourceFlavor missing or listed twice")
		}
		e.flavors[o.Name] = o
	}
	for _, o := range s.ClusterQueues {
		if o == nil || e.clusterQueues[o.Name] != nil {
			return nil, fmt.Errorf("ClusterQueue missing or listed twice")
		}
		e.clusterQueues[o.Name] = o
	}
	for _, o := range s.LocalQueues {
		if o == nil {
			return nil, fmt.Errorf("LocalQueue missing")
		}
		k := api.NamespacedName(o.Namespace, o.Name)
		if e.localQueues[k] != nil {
			return nil, fmt.Errorf("LocalQueue %s listed twice", k)
		}
		e.localQueues[k] = o
	}
	for _, o := range s.WPCs {
		if o == nil || e.wpcs[o.Name] != nil {
			return nil, fmt.Errorf("WorkloadPriorityClass missing or listed twice")
		}
		e.wpcs[o.Name] = o
	}
	for _, o := range s.PCs {
		if o == nil || e.pcs[o.Name] != nil {
			return nil, fmt.Errorf("PriorityClass missing or listed twice")
		}
		e.pcs[o.Name] = o
	}
	if s.Config != nil {
		e.config = s.Config
		e.podsReady = podsready.FromAPI(s.Config)
	}
	for _, cq := range s.ToDrain {
		e.toDrain[cq] = true
	}
	for _, g := range s.Generations {
		if _, dup := e.usage[g.ClusterQueue]; dup {
			return nil, fmt.Errorf("ClusterQueue %s: generation listed twice", g.ClusterQueue)
		}
		e.usage[g.ClusterQueue] = &cqState{admitted: map[string]*Workload{}, total: quota.Usage{}, generation: g.Generation}
	}
	adms := map[*snapAdmission]*scheduler.Admission{}
	for i := range ws {
		if err := rested(rest, i); err != nil {
			return nil, err
		}
		if err := e.restoreWorkload(&ws[i].snapWorkload, ws[i].info, adms); err != nil {
			return nil, err
		}
	}
	// The compiled view and the queues' settings follow the
	// configuration; then the queues take their recorded state.
	e.recompile()
	if err := e.restoreQueues(s.Queues, s.Unparked); err != nil {
		return nil, err
	}
	for _, ev := range s.Evictions {
		if ev.Key == "" {
			return nil, fmt.Errorf("an eviction without a workload")
		}
	}
	e.evictions = s.Evictions
	e.epoch, e.changes, e.settledAt, e.settled, e.admissionSeq = s.Epoch, s.Changes, s.SettledAt, s.Settled, s.AdmissionSeq
	e.cutLoop = s.CutLoop
	e.timerSeq, e.evictedAt, e.evictedTick = s.TimerSeq, s.EvictedAt, s.EvictedTick
	return e, nil
}

// restoreWorkload adds a decoded workload. adms is each admission made
// so far, by the record it was made from: records decoded alike are one
// (decodeWorkloads), and so is what is made of them.
func (e *Engine) restoreWorkload(sw *snapWorkload, info *scheduler.Workload, adms map[*snapAdmission]*scheduler.Admission) error {
	key := info.Key
	if e.workloads[key] != nil {
		return fmt.Errorf("workload %s listed twice", key)
	}
	info.QueueTime, info.ClusterQueue, info.Priority, info.LastTried = sw.QueueTime, sw.ClusterQueue, sw.Priority, sw.LastTried
	info.NamespaceLabels = e.namespaceLabels(sw.Object.Namespace)
	e.shareRequests(info)
	w := &Workload{Object: sw.Object, Info: info, adjusted: sw.Adjusted, AdmittedAt: sw.AdmittedAt, Reason: sw.Reason, Evictions: sw.Evictions,
		PodsReady: sw.PodsReady, RequeueCount: sw.RequeueCount, RequeueAt: sw.RequeueAt, admissionSeq: sw.AdmissionSeq,
		queuedIn: sw.QueuedIn, finishedIn: sw.FinishedIn, publishedReason: sw.PublishedReason, condPending: sw.CondPending,
		listed: sw.Listed, evictedPriority: sw.EvictedPriority, backoffUpdated: sw.BackoffUpdated, evictedUnset: sw.EvictedUnset, timedOut: sw.TimedOut, timerSeq: sw.TimerSeq}
	switch sw.Status {
	case Pending, Finished, Inactive:
		if sw.Admission != nil {
			return fmt.Errorf("workload %s: %s with an admission", key, sw.Status)
		}
	case Admitted:
		if sw.Admission == nil {
			return fmt.Errorf("workload %s: admitted without an admission", key)
		}
	default:
		return fmt.Errorf("workload %s: status %q", key, sw.Status)
	}
	if sw.FinishedQueued && (sw.Status != Finished && sw.Status != Inactive || sw.QueuedIn == "") {
		return fmt.Errorf("workload %s: queued as finished while %s", key, sw.Status)
	}
	if sw.QueuedIn != "" && sw.Status != Pending && !sw.FinishedQueued {
		return fmt.Errorf("workload %s: queued while %s", key, sw.Status)
	}
	e.workloads[key] = w
	e.setStatus(w, sw.Status)
	if sw.FinishedQueued {
		e.finishedQueued[key] = w
	}
	if sa := sw.Admission; sa != nil {
		if w.Admission = adms[sa]; w.Admission == nil {
			ad := scheduler.Admission{ClusterQueue: sa.ClusterQueue, PodSets: sa.PodSets, Usage: quota.Usage{}}
			for _, c := range sa.Usage {
				fr := quota.FlavorResource{Flavor: c.Flavor, Resource: corev1.ResourceName(c.Resource)}
				if _, dup := ad.Usage[fr]; dup || c.Value < 0 {
					return fmt.Errorf("workload %s: usage of %v listed twice or negative", key, fr)
				}
				ad.Usage[fr] = c.Value
			}
			w.Admission = e.shared(ad)
			adms[sa] = w.Admission
		}
		ad := w.Admission
		st := e.state(ad.ClusterQueue)
		if !st.total.Add(ad.Usage) {
			return fmt.Errorf("workload %s: usage of ClusterQueue %s overflows", key, ad.ClusterQueue)
		}
		st.admitted[key] = w
		e.chargeLocalQueue(w, ad.Usage, false)
		w.record = admittedRecord(w)
		e.admittedHash += e.hashAdmitted(w)
	}
	return nil
}

func (e *Engine) restoreQueues(qs []snapQueue, unparked []string) error {
	states := make([]queue.State, 0, len(qs))
	held := make(map[string]string, len(e.workloads))
	for _, sq := range qs {
		sel, err := decodeSelector(sq.Selector)
		if err != nil {
			return fmt.Errorf("queue %s: %w", sq.Name, err)
		}
		st := queue.State{Name: sq.Name, Cohort: sq.Cohort, Strategy: sq.Strategy, Selector: sel, Active: sq.Active,
			PopCycle: sq.PopCycle, InadmissibleCycle: sq.InadmissibleCycle}
		if live := e.queues.Lookup(sq.Name); live != nil && e.clusterQueues[sq.Name] != nil {
			// Compiled from the configuration just now.
			st.Cohort, st.Strategy, st.Selector, st.Active = live.Cohort, live.Strategy, live.Selector, live.Active
		}
		for _, list := range []struct {
			keys []string
			to   *[]*queue.Entry
		}{{sq.Heap, &st.Heap}, {sq.Parked, &st.Parked}} {
			for _, k := range list.keys {
				w := e.workloads[k]
				if w == nil || w.queuedIn != sq.Name {
					return fmt.Errorf("queue %s holds %s, which is not queued there", sq.Name, k)
				}
				held[k] = sq.Name
				*list.to = append(*list.to, &queue.Entry{Workload: w.Info})
			}
		}
		states = append(states, st)
	}
	for k, w := range e.workloads {
		if w.queuedIn != "" && held[k] != w.queuedIn {
			return fmt.Errorf("workload %s is queued in %s but not held there", k, w.queuedIn)
		}
	}
	for _, k := range unparked {
		if e.workloads[k] == nil {
			return fmt.Errorf("unparked workload %s does not exist", k)
		}
	}
	// Queues of ClusterQueues compiled but absent from the snapshot
	// cannot be: every compiled queue has one.
	for name := range e.compiled {
		if !slices.ContainsFunc(states, func(st queue.State) bool { return st.Name == name }) {
			return fmt.Errorf("ClusterQueue %s has no queue", name)
		}
	}
	return e.queues.Restore(states, unparked)
}
