package engine

// Clone copies the engine in memory: what DecodeSnapshot(EncodeSnapshot())
// gives, without rendering every workload to bytes and parsing it back.
// A counterfactual probe or an ETA simulation takes one copy of the
// present state per run; at 100,000 workloads decoding those copies was
// most of a search's CPU.
//
// Each field of the engine, and of what it points to, is one of:
//
//   - copied: everything an event or a cycle changes in place (the maps
//     and indexes, each workload's record and scheduler view, the
//     queues' heaps and entries, each ClusterQueue's and LocalQueue's
//     usage, the fingerprint's bookkeeping);
//   - shared: what neither engine ever writes once it holds it — the
//     configuration objects and their compiled views (Apply replaces
//     them), the workload objects (SetActive and SetPriority replace
//     theirs, copy on write), admissions, reasons, retry states
//     ("never modified once made"), namespace label sets, selectors;
//   - dropped, rebuilt on demand as after a restore: the scheduler's
//     kept snapshot and the changes waiting for it (the next cycle
//     builds one of its own), the cached cohort generations, scratch
//     buffers, the tables of admissions and requests to share (see
//     shared); and the state of a run in progress and the functions
//     that observe runs, which are the original's.
//
// A workload's scheduler view is copied with its own podSet slice: the
// scheduler caches each podSet's requests in it (PodSet.reqs), a write
// the two engines must not share. Its admitted record is copied too, as
// preemption caches a cell mask in it.

import (
	"maps"
	"slices"

	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Clone returns an independent copy of the engine: nothing done to either
// afterwards shows in the other, and the copy decides exactly as the
// engine, or a restore of its snapshot, would. It only reads e, so one
// engine may be cloned again and again, and on several goroutines at once
// (TestClonesAtOnce), though not while it changes.
// Once made, the two engines may be used on two goroutines.
//
// The copy keeps the shard settings (the held function is the caller's,
// shared) and the decisions and evictions not yet drained, but not the
// function ObserveCycles set: its cycles are its own to observe. A clone
// taken during a run (from ObserveCycles' function) is not in the run:
// its next run hashes its fingerprint afresh.
//
// A cycle waiting for PodsReady (blockAdmission) cannot be copied, as
// the scheduler's walk state is its own: Clone panics then. EncodeSnapshot
// refuses that moment too; a replay of the log never runs a cycle.
func (e *Engine) Clone() *Engine { return e.clone(nil) }

// clone is Clone leaving out the pending workloads drop names (see
// CloneWithout).
func (e *Engine) clone(drop map[string]bool) *Engine {
	if e.pass != nil {
		panic("engine: Clone while a cycle waits for PodsReady")
	}
	c := &Engine{
		toDrain:       maps.Clone(e.toDrain),
		flavors:       maps.Clone(e.flavors),
		clusterQueues: maps.Clone(e.clusterQueues),
		localQueues:   maps.Clone(e.localQueues),
		wpcs:          maps.Clone(e.wpcs),
		pcs:           maps.Clone(e.pcs),
		config:        e.config,
		compiled:      maps.Clone(e.compiled),
		inactive:      maps.Clone(e.inactive),
		podsReady:     e.podsReady,
		recording:     e.recording,
		evictions:     slices.Clone(e.evictions),
		decisions:     slices.Clone(e.decisions),
		epoch:         e.epoch,
		fpEpoch:       e.fpEpoch,
		fpSum:         e.fpSum,
		// A sum taken mid-run is not the one a run ended with.
		fpValid:      e.fpValid && !e.inRun,
		changes:      e.changes,
		settledAt:    e.settledAt,
		settled:      e.settled,
		condWrites:   e.condWrites,
		cutLoop:      e.cutLoop,
		admissionSeq: e.admissionSeq,
		timerSeq:     e.timerSeq,
		evictedAt:    e.evictedAt,
		evictedTick:  e.evictedTick,
		admittedHash: e.admittedHash,
		releasedIn:   slices.Clone(e.releasedIn),
		nsLabels:     maps.Clone(e.nsLabels),
		shard:        e.shard,
		heldTree:     e.heldTree,
	}
	k := cloner{from: e, of: make(map[*scheduler.Workload]*Workload, len(e.workloads))}
	k.slabs(e.workloads)
	c.workloads = make(map[string]*Workload, len(e.workloads))
	c.pending = make(map[string]*Workload, len(e.pending))
	c.deactivated = make(map[string]*Workload, len(e.deactivated))
	c.usage = make(map[string]*cqState, len(e.usage))
	for name, st := range e.usage {
		// dirty is only kept while a kept snapshot is, and the copy has none.
		c.usage[name] = &cqState{admitted: make(map[string]*Workload, len(st.admitted)), total: st.total.Clone(),
			generation: st.generation}
	}
	for key, w := range e.workloads {
		if drop[key] && w.Status == Pending {
			k.left(w)
			continue
		}
		cw := k.copy(w)
		c.workloads[key] = cw
		k.of[w.Info] = cw
		// The indexes by status, as setStatus, admit and
		// restoreWorkload keep them.
		switch w.Status {
		case Pending:
			c.pending[key] = cw
		case Inactive:
			c.deactivated[key] = cw
		case Admitted:
			c.usage[w.Admission.ClusterQueue].admitted[key] = cw
		}
	}
	c.finishedQueued = k.index(e.finishedQueued)
	c.lqUse = make(map[[2]string]*lqUse, len(e.lqUse))
	for q, lu := range e.lqUse {
		c.lqUse[q] = &lqUse{reserving: lu.reserving, total: lu.total.Clone()}
	}
	c.triedHashed = make(map[string]map[string]*Workload, len(e.triedHashed))
	for g, m := range e.triedHashed {
		c.triedHashed[g] = k.index(m)
	}
	if k.dropped != nil {
		// The shares of the workloads left out are in the kept sum: the
		// copy's first run hashes afresh.
		c.fpValid = false
		c.settled = false
	}
	if c.fpValid {
		c.fpTouched = make([]*Workload, len(e.fpTouched))
		for i, w := range e.fpTouched {
			c.fpTouched[i] = k.workload(w)
		}
	}
	c.queues = k.queues()
	return c
}

// cloner maps the workloads and scheduler views of one engine to their
// copies, so that what is one object in the engine (a workload in its
// index and its queue's admitted set, a view in its workload and its
// queue entry) is one object in the copy.
type cloner struct {
	from *Engine
	// of maps each workload's view to the workload's copy: a view
	// belongs to one workload, and a pointer hashes faster than a key.
	of map[*scheduler.Workload]*Workload
	// gone are the copies of workloads no longer in from.workloads (a
	// deleted one still in fpTouched or triedHashed, which the next
	// fingerprint takes out of the sum); views the copies of scheduler
	// views that are no workload's own (a queue entry holding the copy
	// an expired backoff pushed, see ApplyRequeue).
	gone  map[*Workload]*Workload
	views map[*scheduler.Workload]*scheduler.Workload
	// dropped are the views of the workloads the copy leaves out.
	dropped map[*scheduler.Workload]bool
	// workloads, infos and podSets are the slabs copies are made in.
	workloads []Workload
	infos     []scheduler.Workload
	podSets   []scheduler.PodSet
}

// slabs allocates the copies of the workloads and of their views in a
// few arrays rather than one object each: a copy of 100,000 workloads
// otherwise makes 300,000 small allocations, most of its time. (A copy
// lives as long as its engine, and its parts die with it.)
func (k *cloner) slabs(ws map[string]*Workload) {
	podSets := 0
	for _, w := range ws {
		podSets += len(w.Info.PodSets)
	}
	k.workloads = make([]Workload, 0, len(ws))
	k.infos = make([]scheduler.Workload, 0, len(ws))
	k.podSets = make([]scheduler.PodSet, 0, podSets)
}

// copy copies one workload's record.
func (k *cloner) copy(w *Workload) *Workload {
	var c *Workload
	if len(k.workloads) < cap(k.workloads) {
		k.workloads = append(k.workloads, *w)
		c = &k.workloads[len(k.workloads)-1]
	} else {
		c = new(Workload)
		*c = *w
	}
	c.Info = k.copyView(w.Info)
	if w.stale != nil {
		c.stale = copyView(w.stale)
	}
	if w.record != nil {
		r := *w.record
		c.record = &r
	}
	return c
}

// copyView is copyView from the slabs while they last.
func (k *cloner) copyView(v *scheduler.Workload) *scheduler.Workload {
	if len(k.infos) == cap(k.infos) || cap(k.podSets)-len(k.podSets) < len(v.PodSets) {
		return copyView(v)
	}
	k.infos = append(k.infos, *v)
	c := &k.infos[len(k.infos)-1]
	n := len(k.podSets)
	k.podSets = append(k.podSets, v.PodSets...)
	// Full slice expression: an append to one view's podSets must not
	// write into the next view's.
	c.PodSets = k.podSets[n:len(k.podSets):len(k.podSets)]
	if v.PodSets == nil {
		c.PodSets = nil
	}
	return c
}

// copyView copies a scheduler view with its own podSets (see the top of
// the file). The podSets' maps and the cached requests they point to are
// never written once made, and are shared.
func copyView(v *scheduler.Workload) *scheduler.Workload {
	c := *v
	c.PodSets = slices.Clone(v.PodSets)
	return &c
}

// left notes a workload the copy leaves out: its view is no entry's.
func (k *cloner) left(w *Workload) {
	if k.dropped == nil {
		k.dropped = map[*scheduler.Workload]bool{}
	}
	k.dropped[w.Info] = true
}

// workload is w's copy.
func (k *cloner) workload(w *Workload) *Workload {
	if c := k.of[w.Info]; c != nil {
		return c
	}
	if c := k.gone[w]; c != nil {
		return c
	}
	if k.gone == nil {
		k.gone = map[*Workload]*Workload{}
	}
	c := k.copy(w)
	k.gone[w] = c
	return c
}

// view is v's copy.
func (k *cloner) view(v *scheduler.Workload) *scheduler.Workload {
	if k.dropped[v] {
		return nil
	}
	if c := k.of[v]; c != nil {
		return c.Info
	}
	if c := k.views[v]; c != nil {
		return c
	}
	if k.views == nil {
		k.views = map[*scheduler.Workload]*scheduler.Workload{}
	}
	c := copyView(v)
	k.views[v] = c
	return c
}

// index copies a map of workloads by key, but for those left out.
func (k *cloner) index(m map[string]*Workload) map[string]*Workload {
	out := make(map[string]*Workload, len(m))
	for key, w := range m {
		if !k.dropped[w.Info] {
			out[key] = k.workload(w)
		}
	}
	return out
}

// queues copies the pending queues, each entry holding the copy of its
// workload's view.
func (k *cloner) queues() *queue.Manager {
	return k.from.queues.Clone(k.view)
}
