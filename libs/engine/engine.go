// Package engine is the in-memory world the decision core runs on: the
// configuration objects, every workload and its status, each ClusterQueue's
// usage, and the pending queues. Each method is one state transition (one
// event of the event log); Cycle runs one scheduling cycle and applies its
// decisions. It does no I/O and never reads a clock: time is passed in, so
// the simulator and the services replaying the log decide identically.
//
//	submit ─▶ pending ──Cycle──▶ admitted ──finish──▶ finished
//	            ▲  │ (not admitted: requeued or parked, with a Reason)
//	            └──┘
package engine

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/podsready"
	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Status is where a workload is in its life.
type Status string

const (
	Pending  Status = "pending"
	Admitted Status = "admitted"
	Finished Status = "finished"
	Inactive Status = "inactive"
)

// Workload is the engine's record of one workload.
type Workload struct {
	// Object is the workload as submitted, without its podSets (see
	// withoutTemplates): Info holds what the scheduler reads of them.
	Object    *api.Workload
	Info      *scheduler.Workload
	Status    Status
	Admission *scheduler.Admission
	// AdmittedAt is when the current admission happened.
	AdmittedAt time.Time
	// Reason is why it is pending, from the last time it was tried.
	Reason *scheduler.Reason
	// Evictions counts how often it lost its quota.
	Evictions int
	// PodsReady is set while admitted once all its pods are ready.
	PodsReady bool
	// RequeueCount and RequeueAt are KEP-349's requeue state: how often it
	// timed out waiting for PodsReady, and when it may queue again.
	RequeueCount int32
	RequeueAt    time.Time
	// evictedPriority is its priority when a PodsReady timeout evicted
	// it, while it waits out the backoff (see ApplyRequeue).
	evictedPriority *int32
	// backoffUpdated is set when its priority changed during that
	// backoff: Kueue then parks the newer version (see ApplyRequeue);
	// evictedUnset records that the evicted version had no priority in
	// its spec (then no later version equals it).
	backoffUpdated, evictedUnset bool
	// timedOut is set while its last eviction is a PodsReady timeout and
	// it has not been admitted since; stale and staleAt are the copy of
	// it a reissued preemption left for the timeout's timer to push (see
	// reissued).
	timedOut     bool
	stale        *scheduler.Workload
	staleAt      time.Time
	admissionSeq uint64
	// timerSeq orders its timer among those due at the same instant: it
	// is set when the timer is armed (see DueTimers).
	timerSeq uint64
	// record is its entry among its queue's admitted workloads.
	record *scheduler.AdmittedWorkload
	// queuedIn is the ClusterQueue whose pending queue holds it, if any.
	queuedIn string
	// hash is its share of the quiescence fingerprint of run hashEpoch.
	hash      uint64
	hashEpoch uint64
	// hashGroup is the triedHashed group holding it, if any.
	hashGroup string
	// keyHash caches the hash of its key that starts its share (0: not
	// computed yet). triedHash caches the share's hash of the retry
	// state triedFor, continued from triedFrom: a retry state is never
	// modified once made, so the pointer identifies it.
	keyHash              uint64
	triedFor             *scheduler.TriedFlavors
	triedFrom, triedHash uint64
	// finishedIn is the ClusterQueue it was admitted to when it finished:
	// Kueue keeps that admission in a finished workload's status.
	finishedIn string
	// listed is set for a finished or inactive workload that Kueue's
	// LocalQueue lists: one that finished without quota, or is inactive,
	// when its LocalQueue is created, which Manager.AddLocalQueue adds to
	// the queues all the same (it skips only the workloads that hold
	// quota). It is queued whenever its ClusterQueue exists (see
	// reroute), until it leaves as a finished workload does (see
	// requeueFinished).
	listed bool
	// publishedReason is the last reason recorded as a decision.
	publishedReason *scheduler.Reason
	// condPending is set while its QuotaReserved condition is False with
	// reason Pending, as Kueue's scheduler writes it after an attempt and
	// the job controller when the workload loses its quota. Another
	// attempt then rewrites at most the condition's message, which under
	// the oracle makes no watch event; a write that sets the condition
	// otherwise (none yet, Inadmissible, Waiting) is an update the
	// workload controller handles (see updated).
	condPending bool
	// adjusted is set when some container has a limit for a resource it
	// does not request (see limitsWithoutRequests), read from the
	// templates at submission.
	adjusted bool
}

// Engine holds the whole admission state.
type Engine struct {
	// toDrain are the ClusterQueues (by name) and LocalQueues (by
	// namespace/name) whose stopPolicy changed, or that were created,
	// since the last cycle, which drains those set to HoldAndDrain.
	toDrain       map[string]bool
	flavors       map[string]*api.ResourceFlavor
	clusterQueues map[string]*api.ClusterQueue
	localQueues   map[string]*api.LocalQueue // by namespace/name
	wpcs          map[string]*api.WorkloadPriorityClass
	pcs           map[string]*api.PriorityClass
	config        *api.Configuration

	// compiled caches the scheduler's view of each ClusterQueue's spec.
	compiled map[string]*scheduler.ClusterQueue
	inactive map[string]string
	usage    map[string]*cqState

	workloads map[string]*Workload
	// pending indexes the pending workloads, so that work proportional to
	// them does not walk every workload ever submitted.
	pending map[string]*Workload
	// deactivated indexes the inactive workloads, and lqUse is what each
	// LocalQueue's admitted workloads hold (by namespace and queue name):
	// Stats reads them rather than walking every workload, which a
	// service does on its deciding goroutine (with 30,000 admitted the
	// walk held decisions up for tens of milliseconds at a time).
	deactivated map[string]*Workload
	lqUse       map[[2]string]*lqUse
	queues      *queue.Manager
	evictions   []Eviction
	podsReady   podsready.Config
	recording   bool
	decisions   []Decision
	// epoch numbers runs to quiescence; fpEpoch numbers full
	// fingerprints, for the fingerprint shares.
	epoch, fpEpoch uint64
	// fpSum is the fingerprint the last run ended with, valid for the
	// next run if fpValid, once the shares of fpTouched, the unparked
	// workloads and the groups of releasedIn are rehashed (see
	// startFingerprint). inRun is set while a run goes on.
	fpSum     uint64
	fpValid   bool
	fpTouched []*Workload
	inRun     bool
	// changes counts calls that change the state from outside a run
	// (events applied, and Cycle itself); settledAt is its value when the
	// last run to quiescence ended.
	changes, settledAt uint64
	settled            bool
	// condWrites counts the first Pending conditions written (see
	// RunToRest).
	condWrites uint64
	// noPreemption is set for the rest of a run once it has looped
	// (see RunToQuiescence); cutLoop is set when the last run did.
	noPreemption, cutLoop bool
	// admissionSeq counts admissions, to order those of one instant.
	admissionSeq uint64
	// timerSeq counts timers armed (see Workload.timerSeq); evictedAt and
	// evictedTick number the PodsReady timeouts of one instant (see
	// ApplyTimeout).
	timerSeq    uint64
	evictedAt   time.Time
	evictedTick time.Duration
	// admittedHash sums hashAdmitted over admitted workloads.
	admittedHash uint64
	// pass is a cycle that blockAdmission stopped at an entry that fits:
	// it goes on once every admitted workload is PodsReady (see Cycle).
	pass *scheduler.Pass
	// finishedQueued are finished or inactive workloads still in a queue
	// (see requeueFinished).
	finishedQueued map[string]*Workload
	// cohortGens caches cohortGeneration; nil when stale.
	cohortGens map[string]int64
	// onCycle, when set, is told of every cycle of a run that popped heads
	// (Kueue's admission attempts); see ObserveCycles.
	onCycle func(CycleResult)
	// triedHashed are the workloads whose share of this run's fingerprint
	// covers a retry state, the only shares a release of quota or an
	// admission changes, by triedGroup of their ClusterQueue; releasedIn
	// are the queues whose generation grew (a release, an admission)
	// since the fingerprint last looked.
	triedHashed map[string]map[string]*Workload
	releasedIn  []string
	// afterCycle, set by tests only, sees the fingerprint after each cycle
	// of a run.
	afterCycle func(fp uint64)
	// resBuf and cellBuf are scratch space for hashPending and
	// hashAdmitted.
	resBuf  []corev1.ResourceName
	cellBuf []quota.FlavorResource

	// snap is the scheduler's view, kept from cycle to cycle and brought
	// up to date by Snapshot; nil once the configuration changed.
	snap *scheduler.Snapshot
	// snapPreempting says whether snap lists admitted workloads.
	snapPreempting bool
	// snapDirty are the ClusterQueues whose usage or generation changed
	// since snap was brought up to date, and snapOps the admitted
	// workloads to list or unlist there, in order.
	snapDirty []string
	snapOps   []snapOp
	// nsLabels caches namespaceLabels.
	nsLabels map[string]labels.Set
	// shard and heldTree limit cycles to the trees this shard decides
	// (see SetShard).
	shard    Shard
	heldTree func(tree string) bool
	// admissions are admissions held by admitted workloads, by hash, for
	// equal ones to share (see shared).
	admissions map[uint64]*scheduler.Admission
	// requests are podSets' per-pod requests, by hash, for equal ones to
	// share (see sharedRequests).
	requests map[uint64]map[corev1.ResourceName]int64
}

// snapOp lists (add) or unlists an admitted workload in the snapshot.
type snapOp struct {
	cq  string
	rec *scheduler.AdmittedWorkload
	add bool
}

// ObserveCycles has f called after every cycle RunToQuiescence runs that
// took at least one head: a service's metrics count and time Kueue's
// admission attempts with it. f must not change the engine.
func (e *Engine) ObserveCycles(f func(CycleResult)) { e.onCycle = f }

// Eviction records a workload losing its quota.
type Eviction struct {
	Key    string `json:"workload"`
	Reason string `json:"reason"`
	// Preemptor, PreemptorCQ and Kind say who preempted it and on what
	// grounds, for reason Preempted.
	Preemptor   string                   `json:"preemptor,omitempty"`
	PreemptorCQ string                   `json:"preemptorClusterQueue,omitempty"`
	Kind        scheduler.PreemptionKind `json:"kind,omitempty"`
	At          time.Time                `json:"at"`
}

// Eviction reasons (Kueue's Evicted condition reasons).
const (
	EvictedByPreemption          = "Preempted"
	EvictedByPodsReadyTimeout    = "PodsReadyTimeout"
	EvictedByDeactivation        = "InactiveWorkload"
	EvictedByClusterQueueStopped = "ClusterQueueStopped"
	// EvictedByLocalQueueStopped is Kueue's WorkloadEvictedByLocalQueueStopped
	// (LocalQueue stopPolicy HoldAndDrain, after v0.6).
	EvictedByLocalQueueStopped = "LocalQueueStopped"
)

// DrainEvictions returns the evictions since the last call.
func (e *Engine) DrainEvictions() []Eviction {
	out := e.evictions
	e.evictions = nil
	return out
}

// cqState is the runtime side of a ClusterQueue; it outlives the spec so a
// deleted and re-created queue still accounts for its admitted workloads.
type cqState struct {
	admitted   map[string]*Workload
	total      quota.Usage
	generation int64
	// dirty is set while the queue is in Engine.snapDirty.
	dirty bool
}

// New returns an empty engine.
func New() *Engine {
	return &Engine{
		flavors:        map[string]*api.ResourceFlavor{},
		clusterQueues:  map[string]*api.ClusterQueue{},
		localQueues:    map[string]*api.LocalQueue{},
		wpcs:           map[string]*api.WorkloadPriorityClass{},
		pcs:            map[string]*api.PriorityClass{},
		compiled:       map[string]*scheduler.ClusterQueue{},
		inactive:       map[string]string{},
		usage:          map[string]*cqState{},
		workloads:      map[string]*Workload{},
		pending:        map[string]*Workload{},
		deactivated:    map[string]*Workload{},
		lqUse:          map[[2]string]*lqUse{},
		queues:         queue.NewManager(),
		toDrain:        map[string]bool{},
		finishedQueued: map[string]*Workload{},
		triedHashed:    map[string]map[string]*Workload{},
		nsLabels:       map[string]labels.Set{},
	}
}

// Workload returns a workload's record, or nil.
func (e *Engine) Workload(key string) *Workload { return e.workloads[key] }

// Workloads returns every workload by key. The map must not be modified.
func (e *Engine) Workloads() map[string]*Workload { return e.workloads }

// Configuration returns the applied Configuration, or nil.
func (e *Engine) Configuration() *api.Configuration { return e.config }

// ErrNotFound is returned for an operation on an unknown workload.
var ErrNotFound = fmt.Errorf("not found")

func (e *Engine) state(cq string) *cqState {
	s := e.usage[cq]
	if s == nil {
		s = &cqState{admitted: map[string]*Workload{}, total: quota.Usage{}, generation: 1}
		e.usage[cq] = s
	}
	return s
}

// setStatus moves a workload to a status, keeping the pending index.
func (e *Engine) setStatus(w *Workload, st Status) {
	w.Status = st
	if st == Pending {
		e.pending[w.Info.Key] = w
	} else {
		delete(e.pending, w.Info.Key)
	}
	if st == Inactive {
		e.deactivated[w.Info.Key] = w
	} else {
		delete(e.deactivated, w.Info.Key)
	}
}

// lqUse is what one LocalQueue's admitted workloads hold.
type lqUse struct {
	reserving int
	total     quota.Usage
}

// chargeLocalQueue adds (or, with release, takes away) an admitted
// workload's usage to its LocalQueue's. A workload's namespace and
// queue name never change in the engine, so its release finds the
// entry its admission charged.
func (e *Engine) chargeLocalQueue(w *Workload, u quota.Usage, release bool) {
	k := [2]string{w.Object.Namespace, w.Object.Spec.QueueName}
	lu := e.lqUse[k]
	if lu == nil {
		lu = &lqUse{total: quota.Usage{}}
		e.lqUse[k] = lu
	}
	if release {
		lu.reserving--
		lu.total.Sub(u)
		if lu.reserving == 0 {
			delete(e.lqUse, k)
		}
		return
	}
	lu.reserving++
	lu.total.Add(u)
}
