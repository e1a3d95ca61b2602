package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// Snapshot is the immutable view one scheduling cycle decides over. Only
// active ClusterQueues are in ClusterQueues and count towards their cohorts,
// as in Kueue's cache.Snapshot.
type Snapshot struct {
	Flavors       map[string]*Flavor
	ClusterQueues map[string]*ClusterQueue
	// Inactive maps an inactive ClusterQueue to why it is inactive.
	Inactive map[string]string
	Cohorts  map[string]*Cohort
}

// Flavor is a ResourceFlavor reduced to what admission reads.
type Flavor struct {
	Name       string
	NodeLabels map[string]string
	Taints     []corev1.Taint
}

// ResourceGroup is one resourceGroups entry: resources that share a flavor.
type ResourceGroup struct {
	Covered []corev1.ResourceName
	Flavors []string
	// LabelKeys are the node label keys any of the group's flavors sets;
	// only these keys of a podSet's node selector are matched.
	LabelKeys sets.Set[string]
}

// ClusterQueue is a queue's quota and its current usage.
type ClusterQueue struct {
	Name              string
	Cohort            *Cohort
	Strategy          api.QueueingStrategy
	NamespaceSelector labels.Selector
	Groups            []ResourceGroup
	GroupOf           map[corev1.ResourceName]int
	Limits            map[quota.FlavorResource]quota.Limits
	Preemption        api.ClusterQueuePreemption
	Fungibility       api.FlavorFungibility
	// Generation grows when quota may have become available: the resource
	// groups changed or a workload released quota. It invalidates the
	// tried-flavor state of pending workloads (KEP-582).
	Generation int64
	Usage      quota.Usage
	// cells numbers the snapshot's quota cells (see cellTable); nil in a
	// queue built by hand, where preemption then hashes.
	cells *cellTable
	// admittedAt indexes Admitted for RemoveAdmitted. It is the queue's
	// own, not the workload's: a workload may be listed in a snapshot a
	// waiting cycle still reads and in the engine's current one.
	admittedAt map[*AdmittedWorkload]int
	// Admitted are the workloads holding quota here, in no particular
	// order: preemption sorts its candidates totally.
	Admitted []*AdmittedWorkload
	// keys are Admitted's priorities and cell masks, index for index,
	// kept by AddAdmitted and RemoveAdmitted for the slice whose first
	// element is at keysOf: preemption filters its candidates without
	// loading each record. See admittedKeys.
	keys   []admittedKey
	keysOf **AdmittedWorkload
	// keysTable is the cell table the masks in keys were computed for.
	keysTable *cellTable
}

// admittedKey is what preemption first reads of an admitted workload.
type admittedKey struct {
	priority int32
	// maskState: maskUnknown until the workload's cellMask was computed
	// for keysTable, then maskKnown (mask holds it) or maskNone (the
	// workload uses a cell the table does not number).
	maskState uint8
	mask      uint64
}

const (
	maskUnknown uint8 = iota
	maskKnown
	maskNone
)

// Cohort is the pool its active members share (KEP-1224 arithmetic).
type Cohort struct {
	Name    string
	Members []*ClusterQueue
	// Requestable is the sum of the members' lendable quota.
	Requestable quota.Usage
	// Used is the sum of the members' usage above their guaranteed quota.
	Used       quota.Usage
	Generation int64
}

// Workload is what admission needs to know about one pending workload.
type Workload struct {
	Key             string // namespace/name
	Namespace       string
	UID             string
	NamespaceLabels labels.Set
	ClusterQueue    string
	Priority        int32
	Created         time.Time
	// QueueTime orders the workload in its queue: creation time, or the
	// eviction time after a PodsReady timeout with timestamp Eviction.
	QueueTime time.Time
	PodSets   []PodSet
	// Misconfigured is set when requests exceed limits; such a workload
	// is never admitted (kueue-semantics §12 #20).
	Misconfigured string
	// LastTried is the flavor retry state of the previous attempt.
	LastTried *TriedFlavors
}

// PodSet is one homogeneous group of pods of a workload.
type PodSet struct {
	Name         string
	Count        int32
	MinCount     *int32
	PerPod       map[corev1.ResourceName]int64
	NodeSelector map[string]string
	Affinity     *corev1.NodeSelector
	Tolerations  []corev1.Toleration
	// reqs caches podSetRequests at the full count: a head that fails is
	// assigned again in later cycles, with the same requests.
	reqs *podSetReqs
}

// podSetReqs is one podSetRequests result and the inputs it was computed
// from besides PerPod, which never changes once the PodSet is built.
type podSetReqs struct {
	count      int32
	coversPods bool
	req        map[corev1.ResourceName]int64
	overflow   corev1.ResourceName
}

// TriedFlavors is KEP-582's retry state: per podSet and resource, the index
// of the flavor the last attempt stopped at (-1: start over), with the
// generations it was computed at.
type TriedFlavors struct {
	Index           []map[corev1.ResourceName]int
	ClusterQueueGen int64
	CohortGen       int64
}

// PendingFlavors reports whether a later attempt would resume past a flavor.
func (t *TriedFlavors) PendingFlavors() bool {
	if t == nil {
		return false
	}
	for _, ps := range t.Index {
		for _, i := range ps {
			if i != -1 {
				return true
			}
		}
	}
	return false
}

// requestable is how much of a cell the queue may hold in total.
func (c *ClusterQueue) requestable(fr quota.FlavorResource) int64 {
	l := c.Limits[fr]
	if c.Cohort == nil {
		return l.Nominal
	}
	return quota.SatAdd(c.Cohort.Requestable[fr], l.Guaranteed())
}

// cohortUsed is the usage that counts against requestable for this queue.
func (c *ClusterQueue) cohortUsed(fr quota.FlavorResource) int64 {
	if c.Cohort == nil {
		return c.Usage[fr]
	}
	return quota.SatAdd(c.Cohort.Used[fr], min(c.Usage[fr], c.Limits[fr].Guaranteed()))
}

// fitsInCohortAfter looks at the cells the entry's usage shares with what
// the cycle already granted in the cohort: common says there is one, and
// fits whether the cohort can still grant their sums to this queue.
func (c *ClusterQueue) fitsInCohortAfter(cycle, entry quota.Usage) (common, fits bool) {
	fits = true
	for fr, v := range entry {
		granted, ok := cycle[fr]
		if !ok {
			continue
		}
		common = true
		if _, ok := c.Cohort.Requestable[fr]; !ok || c.requestable(fr)-c.cohortUsed(fr) < granted+v {
			fits = false
		}
	}
	return common, fits
}

// maxAttainable is the most of a cell this queue could ever hold, with
// everything else in the cohort idle; used to tell ExceedsMaxQuota from
// WaitingForQuota.
func (c *ClusterQueue) maxAttainable(fr quota.FlavorResource) int64 {
	l := c.Limits[fr]
	m := c.requestable(fr)
	if c.Cohort == nil {
		m = l.Nominal
	}
	if l.BorrowingLimit != nil {
		m = min(m, quota.SatAdd(l.Nominal, *l.BorrowingLimit))
	}
	return max(m, l.Nominal)
}

// accumulate adds the queue's contribution to its cohort's pools; sums
// saturate (see libs/quota), so a pool beyond int64 never wraps.
func (c *ClusterQueue) accumulate(co *Cohort) {
	for fr, l := range c.Limits {
		co.Requestable[fr] = quota.SatAdd(co.Requestable[fr], l.Lendable())
	}
	c.accumulateUsage(co)
}

// accumulateUsage adds the queue's usage above its guarantee and its
// generation to its cohort's.
func (c *ClusterQueue) accumulateUsage(co *Cohort) {
	for fr, u := range c.Usage {
		co.Used[fr] = quota.SatAdd(co.Used[fr], max(0, u-c.Limits[fr].Guaranteed()))
	}
	co.Generation += c.Generation
}

// LinkCohorts (re)builds the cohorts from the queues' names; the caller
// gives each queue's cohort name.
func (s *Snapshot) LinkCohorts(cohortOf map[string]string) {
	s.Cohorts = map[string]*Cohort{}
	cells := newCellTable(s.ClusterQueues)
	for _, name := range sortedKeys(s.ClusterQueues) {
		cq := s.ClusterQueues[name]
		cq.Cohort = nil
		cq.cells = cells
		cn := cohortOf[name]
		if cn == "" {
			continue
		}
		co := s.Cohorts[cn]
		if co == nil {
			co = &Cohort{Name: cn, Requestable: quota.Usage{}, Used: quota.Usage{}}
			s.Cohorts[cn] = co
		}
		co.Members = append(co.Members, cq)
		cq.Cohort = co
		cq.accumulate(co)
	}
}

// AddAdmitted lists a newly admitted workload in the queue, so that a
// snapshot kept from cycle to cycle follows admissions without a copy of
// every admitted workload per cycle.
func (c *ClusterQueue) AddAdmitted(w *AdmittedWorkload) {
	if c.admittedAt == nil {
		c.admittedAt = map[*AdmittedWorkload]int{}
	}
	if c.admittedKeys() == nil {
		c.keys = c.keys[:0]
		for _, a := range c.Admitted {
			c.keys = append(c.keys, admittedKey{priority: a.Priority})
		}
	}
	c.admittedAt[w] = len(c.Admitted)
	c.Admitted = append(c.Admitted, w)
	c.keys = append(c.keys, admittedKey{priority: w.Priority})
	c.keysOf = &c.Admitted[0]
}

// admittedKeys is Admitted's keys, or nil unless the list was only changed
// by AddAdmitted and RemoveAdmitted since it was built (a snapshot built
// by hand lists its workloads itself). Masks computed for another cell
// table are forgotten.
func (c *ClusterQueue) admittedKeys() []admittedKey {
	if len(c.Admitted) == 0 || len(c.keys) != len(c.Admitted) || c.keysOf != &c.Admitted[0] {
		return nil
	}
	if c.keysTable != c.cells {
		c.keysTable = c.cells
		for i := range c.keys {
			c.keys[i].maskState = maskUnknown
		}
	}
	return c.keys
}

// RemoveAdmitted unlists a workload that released its quota, moving the
// last one into its place: Admitted has no order (preemption sorts its
// candidates totally). A workload AddAdmitted did not list is ignored.
func (c *ClusterQueue) RemoveAdmitted(w *AdmittedWorkload) {
	i, ok := c.admittedAt[w]
	if !ok {
		return
	}
	delete(c.admittedAt, w)
	keys := c.admittedKeys()
	last := len(c.Admitted) - 1
	if i != last {
		c.Admitted[i] = c.Admitted[last]
		c.admittedAt[c.Admitted[i]] = i
		if keys != nil {
			keys[i] = keys[last]
		}
	}
	c.Admitted[last] = nil
	c.Admitted = c.Admitted[:last]
	if keys != nil {
		c.keys = keys[:last]
	} else {
		c.keys = c.keys[:0]
	}
}

// Recount recomputes a cohort's usage above guarantee and its generation
// from its members, after their usage or generation changed; its
// requestable pool depends on their limits only and stays.
func (co *Cohort) Recount() {
	clear(co.Used)
	co.Generation = 0
	for _, m := range co.Members {
		m.accumulateUsage(co)
	}
}
