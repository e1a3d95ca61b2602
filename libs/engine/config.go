package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/podsready"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Action says what Apply did to an object.
type Action string

const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
)

// Apply creates or updates a configuration object. The object must have
// passed api.Validate. Changes that may free capacity re-queue the parked
// workloads of the affected cohorts (kueue-semantics §4.4).
func (e *Engine) Apply(obj api.Object, now time.Time) (Action, error) {
	e.changes++
	e.invalidateFingerprint()
	switch o := obj.(type) {
	case *api.ResourceFlavor:
		old := e.flavors[o.Name]
		if old != nil && equality.Semantic.DeepEqual(old.Spec, o.Spec) {
			return Unchanged, nil
		}
		e.flavors[o.Name] = o
		e.requeue(e.recompile(), now)
		return created(old == nil), nil
	case *api.ClusterQueue:
		old := e.clusterQueues[o.Name]
		if old != nil && equality.Semantic.DeepEqual(old.Spec, o.Spec) {
			return Unchanged, nil
		}
		if err := e.CheckApply(o); err != nil {
			return "", err
		}
		st := e.state(o.Name)
		if old == nil || !equality.Semantic.DeepEqual(old.Spec.ResourceGroups, o.Spec.ResourceGroups) {
			st.generation++
		}
		e.clusterQueues[o.Name] = o
		e.recompile()
		// Kueue's queue manager requeues the parked workloads of the
		// queue's new cohort only (UpdateClusterQueue,
		// queueAllInadmissibleWorkloadsInCohort): the cohort a queue left
		// keeps its parked workloads parked, even if it gained capacity.
		e.queues.QueueInadmissible(o.Name, now)
		e.reroute(now)
		if old == nil || stopPolicy(old) != stopPolicy(o) {
			// Drained by the next cycle, which records the evictions
			// for a service to publish; applying the configuration
			// again from the log (a replay) then finds them there.
			e.toDrain[o.Name] = true
		}
		return created(old == nil), nil
	case *api.LocalQueue:
		key := api.NamespacedName(o.Namespace, o.Name)
		old := e.localQueues[key]
		if old != nil && equality.Semantic.DeepEqual(old.Spec, o.Spec) {
			return Unchanged, nil
		}
		if err := e.CheckApply(o); err != nil {
			return "", err
		}
		e.localQueues[key] = o
		if old == nil {
			for _, w := range e.workloads {
				if (w.Status == Finished && w.finishedIn == "" || w.Status == Inactive) && w.Object.Namespace == o.Namespace &&
					w.Object.Spec.QueueName == o.Name {
					w.listed = true
				}
			}
		}
		e.reroute(now)
		if old == nil || lqStopPolicy(old) != lqStopPolicy(o) {
			// As for a ClusterQueue: drained by the next cycle. The key
			// holds a "/", which no ClusterQueue name does.
			e.toDrain[key] = true
		}
		return created(old == nil), nil
	case *api.WorkloadPriorityClass:
		old := e.wpcs[o.Name]
		e.wpcs[o.Name] = o
		if old != nil && old.Value == o.Value && old.Description == o.Description {
			return Unchanged, nil
		}
		return created(old == nil), nil
	case *api.PriorityClass:
		old := e.pcs[o.Name]
		e.pcs[o.Name] = o
		if old != nil && old.Value == o.Value && old.GlobalDefault == o.GlobalDefault {
			return Unchanged, nil
		}
		return created(old == nil), nil
	case *api.Configuration:
		old := e.config
		e.config = o
		e.podsReady = podsready.FromAPI(o)
		if old != nil && equality.Semantic.DeepEqual(old, o) {
			return Unchanged, nil
		}
		return created(old == nil), nil
	}
	return "", fmt.Errorf("%s: cannot be applied as configuration", api.ObjectRef(obj))
}

// DeleteConfig removes a configuration object by kind and name (namespace
// for LocalQueue). Missing objects are ErrNotFound.
func (e *Engine) DeleteConfig(kind, namespace, name string, now time.Time) error {
	e.changes++
	e.invalidateFingerprint()
	switch kind {
	case api.KindResourceFlavor:
		if e.flavors[name] == nil {
			return ErrNotFound
		}
		delete(e.flavors, name)
		e.requeue(e.recompile(), now)
	case api.KindClusterQueue:
		old := e.clusterQueues[name]
		if old == nil {
			return ErrNotFound
		}
		delete(e.clusterQueues, name)
		e.recompile()
		// Kueue requeues nothing when a ClusterQueue is deleted
		// (Manager.DeleteClusterQueue), not even in its cohort.
		e.reroute(now)
	case api.KindLocalQueue:
		key := api.NamespacedName(namespace, name)
		if e.localQueues[key] == nil {
			return ErrNotFound
		}
		delete(e.localQueues, key)
		e.reroute(now)
	case api.KindWorkloadPriorityClass:
		if e.wpcs[name] == nil {
			return ErrNotFound
		}
		delete(e.wpcs, name)
	case api.KindPriorityClass:
		if e.pcs[name] == nil {
			return ErrNotFound
		}
		delete(e.pcs, name)
	default:
		return fmt.Errorf("kind %q cannot be deleted as configuration", kind)
	}
	return nil
}

// drain evicts the admitted workloads of a ClusterQueue whose stopPolicy
// is HoldAndDrain, in key order, with reason ClusterQueueStopped; they
// wait in its (inactive) queue with their creation time. Kueue reconciles
// a ClusterQueue's workloads when it is created or its stopPolicy changes
// (workloadCqHandler), and reconcileOnClusterQueueActiveState evicts each
// admitted one (pkg/controller/core/workload_controller.go). Hold keeps
// them.
func (e *Engine) drain(cq string, now time.Time) {
	if !e.draining(cq) {
		return
	}
	st := e.state(cq)
	for _, key := range sortedKeys(st.admitted) {
		e.stop(st.admitted[key], now)
	}
}

// drainLocalQueue evicts the admitted workloads of a LocalQueue whose
// stopPolicy is HoldAndDrain, in key order, with reason LocalQueueStopped
// (Kueue's reconcileOnLocalQueueActiveState, after v0.6: an admitted
// workload of a HoldAndDrain LocalQueue is evicted, "The LocalQueue is
// stopped"). They go back to pending and, the LocalQueue being stopped,
// wait outside any queue until it is resumed. Hold keeps them.
//
// Its pending workloads, those it evicts included, then have their reason
// recorded (QuotaReserved False, "LocalQueue NAME is stopped", which
// Kueue's workload controller writes), once per change: recordReason
// skips a reason already published or read back from the log.
func (e *Engine) drainLocalQueue(key string, now time.Time) {
	lq := e.localQueues[key]
	if lq == nil || lqStopPolicy(lq) == api.StopPolicyNone {
		return
	}
	of := func(w *Workload) bool {
		return w.Object.Namespace == lq.Namespace && w.Object.Spec.QueueName == lq.Name
	}
	if lqStopPolicy(lq) == api.StopPolicyHoldAndDrain {
		for _, k := range sortedKeys(e.workloads) {
			if w := e.workloads[k]; w.Status == Admitted && of(w) {
				e.stopWith(w, EvictedByLocalQueueStopped, now)
			}
		}
	}
	for _, k := range sortedKeys(e.pending) {
		if w := e.pending[k]; of(w) && w.Reason != nil && w.Reason.Token == scheduler.LocalQueueStopped {
			e.recordReason(w)
		}
	}
}

// stop evicts an admitted workload of a HoldAndDrain ClusterQueue and
// records the eviction, which only the engine decides.
func (e *Engine) stop(w *Workload, now time.Time) {
	e.stopWith(w, EvictedByClusterQueueStopped, now)
}

func (e *Engine) stopWith(w *Workload, reason string, now time.Time) {
	e.evict(w, Eviction{Reason: reason}, now)
	e.record(Decision{Kind: DecidedEviction, Key: w.Info.Key, EvictionReason: reason})
}

// draining reports whether a ClusterQueue's stopPolicy is HoldAndDrain.
func (e *Engine) draining(cq string) bool {
	c := e.clusterQueues[cq]
	return c != nil && stopPolicy(c) == api.StopPolicyHoldAndDrain
}

func stopPolicy(cq *api.ClusterQueue) api.StopPolicy {
	if cq.Spec.StopPolicy == nil {
		return api.StopPolicyNone
	}
	return *cq.Spec.StopPolicy
}

// lqStopPolicy is a LocalQueue's stopPolicy; absent is None.
func lqStopPolicy(lq *api.LocalQueue) api.StopPolicy {
	if lq.Spec.StopPolicy == nil || *lq.Spec.StopPolicy == "" {
		return api.StopPolicyNone
	}
	return *lq.Spec.StopPolicy
}

func created(isNew bool) Action {
	if isNew {
		return Created
	}
	return Updated
}

// recompile rebuilds the scheduler view of every ClusterQueue and returns
// the queues that became active, which is what re-queues parked workloads
// after a ResourceFlavor change (Kueue's cache.updateClusterQueues).
func (e *Engine) recompile() []string {
	e.cohortGens = nil
	e.snap = nil
	for name := range e.compiled {
		if e.clusterQueues[name] == nil {
			delete(e.compiled, name)
			delete(e.inactive, name)
			e.queues.Queue(name).Active = false
		}
	}
	var activated []string
	for _, name := range sortedKeys(e.clusterQueues) {
		cq := e.clusterQueues[name]
		_, existed := e.compiled[name]
		wasInactive := e.inactive[name] != ""
		c, why := compile(cq, e.flavors)
		e.compiled[name] = c
		if why != "" {
			e.inactive[name] = why
		} else {
			delete(e.inactive, name)
			if existed && wasInactive {
				activated = append(activated, name)
			}
		}
		q := e.queues.Queue(name)
		q.Cohort, q.Strategy, q.Selector, q.Active = cq.Spec.Cohort, cq.Spec.QueueingStrategy, c.NamespaceSelector, why == ""
	}
	return activated
}

func (e *Engine) requeue(queues []string, now time.Time) {
	for _, name := range queues {
		e.queues.QueueInadmissible(name, now)
	}
}

// compile turns a ClusterQueue spec into the scheduler's view, and says
// why the queue is inactive, if it is.
func compile(cq *api.ClusterQueue, flavors map[string]*api.ResourceFlavor) (*scheduler.ClusterQueue, string) {
	c := &scheduler.ClusterQueue{
		Name:        cq.Name,
		Strategy:    cq.Spec.QueueingStrategy,
		GroupOf:     map[corev1.ResourceName]int{},
		Limits:      map[quota.FlavorResource]quota.Limits{},
		Fungibility: api.FlavorFungibility{WhenCanBorrow: api.FungibilityBorrow, WhenCanPreempt: api.FungibilityTryNextFlavor},
	}
	if f := cq.Spec.FlavorFungibility; f != nil {
		c.Fungibility = *f
	}
	if cq.Spec.Preemption != nil {
		c.Preemption = *cq.Spec.Preemption
	}
	if cq.Spec.NamespaceSelector != nil {
		// Validated already; a nil selector matches nothing.
		c.NamespaceSelector, _ = metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	}
	var missing []string
	for gi, rg := range cq.Spec.ResourceGroups {
		g := scheduler.ResourceGroup{Covered: rg.CoveredResources, LabelKeys: sets.New[string]()}
		for _, r := range rg.CoveredResources {
			c.GroupOf[r] = gi
		}
		for _, f := range rg.Flavors {
			g.Flavors = append(g.Flavors, f.Name)
			if rf := flavors[f.Name]; rf != nil {
				for k := range rf.Spec.NodeLabels {
					g.LabelKeys.Insert(k)
				}
			} else {
				missing = append(missing, f.Name)
			}
			for _, r := range f.Resources {
				l := quota.Limits{Nominal: quota.Value(r.Name, r.NominalQuota)}
				if r.BorrowingLimit != nil {
					v := quota.Value(r.Name, *r.BorrowingLimit)
					l.BorrowingLimit = &v
				}
				if r.LendingLimit != nil {
					v := quota.Value(r.Name, *r.LendingLimit)
					l.LendingLimit = &v
				}
				c.Limits[quota.FlavorResource{Flavor: f.Name, Resource: r.Name}] = l
			}
		}
		c.Groups = append(c.Groups, g)
	}
	switch {
	case len(missing) > 0:
		return c, fmt.Sprintf("flavor %s not found", missing[0])
	case len(cq.Spec.AdmissionChecks) > 0:
		// jetqueue has no AdmissionCheck objects: every one named is
		// missing, which keeps Kueue's queue inactive too
		// (pkg/cache/clusterqueue.go updateQueueStatus).
		return c, fmt.Sprintf("admission check %s not found", cq.Spec.AdmissionChecks[0])
	case cq.Spec.StopPolicy != nil && *cq.Spec.StopPolicy != api.StopPolicyNone:
		return c, fmt.Sprintf("stopPolicy is %s", *cq.Spec.StopPolicy)
	}
	return c, ""
}

// Snapshot returns the view one cycle decides over. It is kept from cycle
// to cycle: the admissions and releases since the last call are applied
// to it (their queues' usage and generation, their cohorts' sums, the
// admitted lists), and it is rebuilt only after a configuration change.
// The view must not change while a cycle reads it, even one that waits
// for PodsReady across events: hence the changes are applied here, by the
// next cycle, never as they happen; a cycle that waits keeps the engine
// from starting another (see Cycle), and a caller asking meanwhile gets a
// snapshot of its own. A caller outside a cycle reads the snapshot before
// the engine's next event, and never changes it.
func (e *Engine) Snapshot() *scheduler.Snapshot {
	if e.pass != nil {
		s, _ := e.buildSnapshot()
		return s
	}
	if e.snap == nil {
		e.snap, e.snapPreempting = e.buildSnapshot()
	} else {
		e.refreshSnapshot()
	}
	for _, name := range e.snapDirty {
		e.usage[name].dirty = false
	}
	e.snapDirty = e.snapDirty[:0]
	clear(e.snapOps)
	e.snapOps = e.snapOps[:0]
	return e.snap
}

// snapUsageChanged notes that a queue's usage or generation changed.
func (e *Engine) snapUsageChanged(name string, st *cqState) {
	if e.snap != nil && !st.dirty {
		st.dirty = true
		e.snapDirty = append(e.snapDirty, name)
	}
}

// snapAdmitted notes that a workload was admitted to (add) or released
// from a queue. Past a bound, as when no cycle runs for a long replay,
// the snapshot is dropped rather than the changes kept.
func (e *Engine) snapAdmitted(name string, rec *scheduler.AdmittedWorkload, add bool) {
	if e.snap == nil || !e.snapPreempting {
		return
	}
	if len(e.snapOps) > 4096+len(e.workloads) {
		// The next Snapshot rebuilds it and forgets the changes.
		e.snap = nil
		return
	}
	e.snapOps = append(e.snapOps, snapOp{cq: name, rec: rec, add: add})
}

// refreshSnapshot applies the changes since the last cycle to the kept
// snapshot.
func (e *Engine) refreshSnapshot() {
	s := e.snap
	for _, op := range e.snapOps {
		if cq := s.ClusterQueues[op.cq]; cq != nil {
			if op.add {
				cq.AddAdmitted(op.rec)
			} else {
				cq.RemoveAdmitted(op.rec)
			}
		}
	}
	var cohorts []*scheduler.Cohort
	for _, name := range e.snapDirty {
		cq := s.ClusterQueues[name]
		if cq == nil {
			continue
		}
		st := e.usage[name]
		clear(cq.Usage)
		maps.Copy(cq.Usage, st.total)
		cq.Generation = st.generation
		if co := cq.Cohort; co != nil && !slices.Contains(cohorts, co) {
			cohorts = append(cohorts, co)
		}
	}
	for _, co := range cohorts {
		co.Recount()
	}
}

// buildSnapshot builds the view from scratch, and says whether it lists
// the admitted workloads.
func (e *Engine) buildSnapshot() (*scheduler.Snapshot, bool) {
	s := &scheduler.Snapshot{
		Flavors:       make(map[string]*scheduler.Flavor, len(e.flavors)),
		ClusterQueues: make(map[string]*scheduler.ClusterQueue, len(e.compiled)),
		Inactive:      make(map[string]string, len(e.inactive)),
	}
	for name, f := range e.flavors {
		s.Flavors[name] = &scheduler.Flavor{Name: name, NodeLabels: f.Spec.NodeLabels, Taints: f.Spec.NodeTaints}
	}
	// Preemption candidates are only needed if some queue may preempt;
	// listing every admitted workload would cost O(admitted) for nothing.
	preempting := false
	for name, c := range e.compiled {
		p := c.Preemption
		if e.inactive[name] == "" && (mayPreempt(p.WithinClusterQueue) || mayPreempt(p.ReclaimWithinCohort)) {
			preempting = true
		}
	}
	cohortOf := map[string]string{}
	for name, c := range e.compiled {
		if why := e.inactive[name]; why != "" {
			s.Inactive[name] = why
			continue
		}
		cq := *c
		st := e.state(name)
		cq.Generation = st.generation
		cq.Usage = st.total.Clone()
		cq.Admitted = nil
		if preempting {
			cq.Admitted = make([]*scheduler.AdmittedWorkload, 0, len(st.admitted))
			for _, w := range st.admitted {
				cq.AddAdmitted(w.record)
			}
		}
		s.ClusterQueues[name] = &cq
		cohortOf[name] = e.clusterQueues[name].Spec.Cohort
	}
	s.LinkCohorts(cohortOf)
	return s, preempting
}

// CheckApply reports whether Apply would refuse obj, without applying it.
func (e *Engine) CheckApply(obj api.Object) error {
	switch o := obj.(type) {
	case *api.ClusterQueue:
		if old := e.clusterQueues[o.Name]; old != nil && old.Spec.QueueingStrategy != o.Spec.QueueingStrategy {
			return fmt.Errorf("ClusterQueue/%s: spec.queueingStrategy: field is immutable", o.Name)
		}
	case *api.LocalQueue:
		// Kueue's ValidateLocalQueueUpdate.
		if old := e.localQueues[api.NamespacedName(o.Namespace, o.Name)]; old != nil && old.Spec.ClusterQueue != o.Spec.ClusterQueue {
			return fmt.Errorf("LocalQueue/%s/%s: spec.clusterQueue: field is immutable", o.Namespace, o.Name)
		}
	case *api.ResourceFlavor, *api.WorkloadPriorityClass, *api.PriorityClass, *api.Configuration:
	default:
		return fmt.Errorf("%s: cannot be applied as configuration", api.ObjectRef(obj))
	}
	return nil
}

// WorkloadPriorityClass implements api.PriorityClasses. The engine holds
// its classes in memory, so a lookup never fails.
func (e *Engine) WorkloadPriorityClass(name string) (int32, bool, error) {
	if c := e.wpcs[name]; c != nil {
		return c.Value, true, nil
	}
	return 0, false, nil
}

// PriorityClass implements api.PriorityClasses; it never fails.
func (e *Engine) PriorityClass(name string) (int32, bool, error) {
	if c := e.pcs[name]; c != nil {
		return c.Value, true, nil
	}
	return 0, false, nil
}

// GlobalDefaultPriorityClass implements api.PriorityClasses: the lowest
// valued globalDefault class, as Kubernetes' admission picks. It never
// fails.
func (e *Engine) GlobalDefaultPriorityClass() (string, int32, bool, error) {
	var best *api.PriorityClass
	for _, name := range sortedKeys(e.pcs) {
		c := e.pcs[name]
		if c.GlobalDefault && (best == nil || c.Value < best.Value) {
			best = c
		}
	}
	if best == nil {
		return "", 0, false, nil
	}
	return best.Name, best.Value, true, nil
}

func mayPreempt(p api.PreemptionPolicy) bool { return p != "" && p != api.PreemptionNever }
