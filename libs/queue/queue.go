// Package queue holds the pending workloads of every ClusterQueue, in
// Kueue's order (priority, then queue time), and the parking rules that
// decide when a workload that could not be admitted is tried again
// (Kueue's pkg/queue, kueue-semantics §4).
//
// A ClusterQueue's pending workloads are either in its heap (tried when
// they reach the head) or parked as inadmissible (tried again only after an
// event that may have freed capacity: QueueInadmissible).
package queue

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Less is the heap order: higher priority, then earlier queue time, then
// key so that equal timestamps still order deterministically.
func Less(a, b *scheduler.Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if c := a.QueueTime.Compare(b.QueueTime); c != 0 {
		return c < 0
	}
	return a.Key < b.Key
}

// Entry is a pending workload with its requeue backoff.
type Entry struct {
	Workload *scheduler.Workload
	// NotBefore parks the workload until then (waitForPodsReady backoff).
	NotBefore time.Time
	// pos is its index in its queue's heap while it is there.
	pos int
}

// ClusterQueue is one queue's pending workloads.
type ClusterQueue struct {
	Name     string
	Cohort   string
	Strategy api.QueueingStrategy
	Selector labels.Selector
	Active   bool

	heap   entryHeap
	parked map[string]*Entry
	// popCycle counts pops; inadmissibleCycle records the pop cycle of the
	// last QueueInadmissible, so that a head requeued after an event that
	// happened during its own cycle is not parked on stale grounds.
	popCycle          int64
	inadmissibleCycle int64
}

func newClusterQueue(name string) *ClusterQueue {
	return &ClusterQueue{Name: name, parked: map[string]*Entry{}, inadmissibleCycle: -1,
		heap: entryHeap{index: map[string]*Entry{}}}
}

func (c *ClusterQueue) backoffOver(e *Entry, now time.Time) bool {
	return !now.Before(e.NotBefore)
}

// Len is the number of pending workloads, in the heap and parked.
func (c *ClusterQueue) Len() int { return len(c.heap.items) + len(c.parked) }

// Pending returns the pending workloads in queue order.
func (c *ClusterQueue) Pending() []*scheduler.Workload {
	out := make([]*scheduler.Workload, 0, c.Len())
	for i := range c.heap.items {
		out = append(out, c.heap.items[i].entry.Workload)
	}
	for _, e := range c.parked {
		out = append(out, e.Workload)
	}
	slices.SortFunc(out, func(a, b *scheduler.Workload) int {
		if Less(a, b) {
			return -1
		}
		if Less(b, a) {
			return 1
		}
		return 0
	})
	return out
}

// Parked reports whether the workload is parked as inadmissible.
func (c *ClusterQueue) Parked(key string) bool { _, ok := c.parked[key]; return ok }

// Manager routes pending workloads to their ClusterQueue.
type Manager struct {
	queues map[string]*ClusterQueue
	// names are the queues' names in order; nil when a queue was added or
	// removed since (see sortedNames).
	names []string
	// unparked are the workloads moved back from parked, for DrainUnparked.
	unparked []string
}

// NewManager returns an empty manager.
func NewManager() *Manager { return &Manager{queues: map[string]*ClusterQueue{}} }

// Queue returns a ClusterQueue's pending queue, creating it if needed.
func (m *Manager) Queue(name string) *ClusterQueue {
	q := m.queues[name]
	if q == nil {
		q = newClusterQueue(name)
		m.queues[name] = q
		m.names = nil
	}
	return q
}

// Footprint counts the entries the manager holds, for memory accounting:
// workloads in the heaps, the heaps' index, parked workloads, and
// unparked ones not yet drained.
func (m *Manager) Footprint() (queued, indexed, parked, unparked int) {
	for _, q := range m.queues {
		queued += len(q.heap.items)
		indexed += len(q.heap.index)
		parked += len(q.parked)
	}
	return queued, indexed, parked, len(m.unparked)
}

// Lookup returns a queue or nil.
func (m *Manager) Lookup(name string) *ClusterQueue { return m.queues[name] }

// Remove drops a queue and returns what was pending in it.
func (m *Manager) Remove(name string) []*scheduler.Workload {
	q := m.queues[name]
	if q == nil {
		return nil
	}
	delete(m.queues, name)
	m.names = nil
	return q.Pending()
}

// Heads pops the head of every active queue, in queue-name order.
func (m *Manager) Heads() []*scheduler.Workload { return m.HeadsOf(nil) }

// HeadsOf pops the head of every active queue that owned accepts (every
// queue if nil), in queue-name order: a sharded admission nominates only
// the heads of the ClusterQueues it decides, and leaves the others'
// queues untouched.
func (m *Manager) HeadsOf(owned func(cq string) bool) []*scheduler.Workload {
	var heads []*scheduler.Workload
	for _, name := range m.sortedNames() {
		q := m.queues[name]
		if !q.Active || owned != nil && !owned(name) {
			continue
		}
		q.popCycle++
		if len(q.heap.items) == 0 {
			continue
		}
		heads = append(heads, q.heap.pop().Workload)
	}
	return heads
}

// Push adds a new or changed workload (Kueue's PushOrUpdate): a parked
// workload whose ordering-relevant state changed goes back to the heap.
func (m *Manager) Push(e *Entry, changed bool, now time.Time) {
	q := m.Queue(e.Workload.ClusterQueue)
	key := e.Workload.Key
	if _, ok := q.parked[key]; ok {
		if !changed {
			q.parked[key] = e
			return
		}
		delete(q.parked, key)
	}
	if !q.heap.has(key) && !q.backoffOver(e, now) {
		q.parked[key] = e
		return
	}
	q.heap.upsert(e)
}

// Park puts a workload among its queue's parked ones, out of the heap
// (Kueue's inadmissibleWorkloads), until QueueInadmissible or a change
// moves it back.
func (m *Manager) Park(e *Entry) {
	q := m.Queue(e.Workload.ClusterQueue)
	q.heap.remove(e.Workload.Key)
	q.parked[e.Workload.Key] = e
}

// Requeue puts back a head that was not admitted. Whether it goes straight
// back to the heap or is parked depends on the strategy and the reason
// (kueue-semantics §4.3).
func (m *Manager) Requeue(e *Entry, reason scheduler.RequeueReason, now time.Time) {
	q := m.Queue(e.Workload.ClusterQueue)
	key := e.Workload.Key
	immediate := reason == scheduler.RequeueFailedAfterNomination || reason == scheduler.RequeuePendingPreemption
	if q.Strategy == api.StrictFIFO {
		immediate = reason != scheduler.RequeueNamespaceMismatch
	}
	if q.backoffOver(e, now) && (immediate || q.inadmissibleCycle >= q.popCycle || e.Workload.LastTried.PendingFlavors()) {
		if p, ok := q.parked[key]; ok {
			e = p
			delete(q.parked, key)
		}
		if !q.heap.has(key) {
			q.heap.upsert(e)
		}
		return
	}
	if _, ok := q.parked[key]; ok || q.heap.has(key) {
		return
	}
	q.parked[key] = e
}

// Delete removes a workload from its queue.
func (m *Manager) Delete(cq, key string) {
	if q := m.queues[cq]; q != nil {
		delete(q.parked, key)
		q.heap.remove(key)
	}
}

// QueueInadmissible moves the parked workloads of the queue's cohort (or
// of the queue alone without a cohort) back to their heaps: something
// happened that may let them in.
func (m *Manager) QueueInadmissible(cq string, now time.Time) {
	q := m.queues[cq]
	if q == nil {
		return
	}
	if q.Cohort == "" {
		m.unparked = q.requeueParked(now, m.unparked)
		return
	}
	for _, name := range m.sortedNames() {
		if other := m.queues[name]; other.Cohort == q.Cohort {
			m.unparked = other.requeueParked(now, m.unparked)
		}
	}
}

// DrainUnparked returns the workloads QueueInadmissible moved from parked
// back to their heaps since the last call: a run to quiescence must
// count them as changed.
func (m *Manager) DrainUnparked() []string {
	out := m.unparked
	m.unparked = nil
	return out
}

func (c *ClusterQueue) requeueParked(now time.Time, moved []string) []string {
	c.inadmissibleCycle = c.popCycle
	for key, e := range c.parked {
		if c.Selector == nil || !c.Selector.Matches(e.Workload.NamespaceLabels) || !c.backoffOver(e, now) {
			continue
		}
		moved = append(moved, key)
		delete(c.parked, key)
		if !c.heap.has(key) {
			c.heap.upsert(e)
		}
	}
	return moved
}

// NextBackoff returns the earliest NotBefore among parked workloads after
// now, for timers.
func (m *Manager) NextBackoff(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, q := range m.queues {
		for _, e := range q.parked {
			if e.NotBefore.After(now) && (next.IsZero() || e.NotBefore.Before(next)) {
				next = e.NotBefore
			}
		}
	}
	return next, !next.IsZero()
}

// entryHeap is a ClusterQueue's heap. Each entry keeps its own position,
// so that moving entries costs no map update; the map finds an entry by key.
// The heap holds a copy of each entry's ordering fields (what Less reads)
// beside it, so that sifting compares siblings that sit side by side
// without loading their workloads: a workload's priority, queue time and
// key never change in place while it is queued (the engine replaces the
// info and pushes it again).
type entryHeap struct {
	items []heapItem
	index map[string]*Entry
}

// heapItem is an entry with a copy of what Less reads of its workload.
type heapItem struct {
	priority  int32
	queueTime time.Time
	key       string
	entry     *Entry
}

func itemOf(e *Entry) heapItem {
	w := e.Workload
	return heapItem{priority: w.Priority, queueTime: w.QueueTime, key: w.Key, entry: e}
}

// less is Less over the copied fields.
func (a *heapItem) less(b *heapItem) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if c := a.queueTime.Compare(b.queueTime); c != 0 {
		return c < 0
	}
	return a.key < b.key
}

func (h *entryHeap) set(i int, it heapItem) {
	h.items[i] = it
	it.entry.pos = i
}

// up and down are container/heap's sifts, moving a hole instead of
// swapping.
func (h *entryHeap) up(j int) {
	it := h.items[j]
	for j > 0 {
		i := (j - 1) / 2
		if !it.less(&h.items[i]) {
			break
		}
		h.set(j, h.items[i])
		j = i
	}
	h.set(j, it)
}

func (h *entryHeap) down(i0, n int) bool {
	i := i0
	it := h.items[i]
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 {
			break
		}
		j := j1
		if j2 := j1 + 1; j2 < n && h.items[j2].less(&h.items[j1]) {
			j = j2
		}
		if !h.items[j].less(&it) {
			break
		}
		h.set(i, h.items[j])
		i = j
	}
	h.set(i, it)
	return i > i0
}

// heapify restores the heap order over all items (container/heap.Init).
func (h *entryHeap) heapify() {
	n := len(h.items)
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i, n)
	}
}

func (h *entryHeap) fix(i int) {
	if !h.down(i, len(h.items)) {
		h.up(i)
	}
}

func (h *entryHeap) push(e *Entry) {
	h.index[e.Workload.Key] = e
	h.items = append(h.items, heapItem{})
	h.set(len(h.items)-1, itemOf(e))
	h.up(len(h.items) - 1)
}

// removeAt takes out the entry at position i (container/heap's Remove).
func (h *entryHeap) removeAt(i int) *Entry {
	n := len(h.items) - 1
	e := h.items[i].entry
	if n != i {
		h.set(i, h.items[n])
	}
	h.items[n] = heapItem{}
	h.items = h.items[:n]
	if n != i {
		h.fix(i)
	}
	delete(h.index, e.Workload.Key)
	return e
}

func (h *entryHeap) pop() *Entry { return h.removeAt(0) }

// entries are the queued entries, in heap order.
func (h *entryHeap) entries() []*Entry {
	out := make([]*Entry, len(h.items))
	for i := range h.items {
		out[i] = h.items[i].entry
	}
	return out
}

func (h *entryHeap) has(key string) bool { _, ok := h.index[key]; return ok }

// grow makes room for n more entries.
func (h *entryHeap) grow(n int) {
	if n <= 0 {
		return
	}
	h.items = slices.Grow(h.items, n)
	index := make(map[string]*Entry, len(h.index)+n)
	for k, e := range h.index {
		index[k] = e
	}
	h.index = index
}

func (h *entryHeap) upsert(e *Entry) {
	if old, ok := h.index[e.Workload.Key]; ok {
		i := old.pos
		h.set(i, itemOf(e))
		h.index[e.Workload.Key] = e
		h.fix(i)
		return
	}
	h.push(e)
}
func (h *entryHeap) remove(key string) {
	if e, ok := h.index[key]; ok {
		h.removeAt(e.pos)
	}
}

// sortedNames are the queues' names in order, kept until a queue is added
// or removed: every cycle and every release walks them.
func (m *Manager) sortedNames() []string {
	if m.names == nil {
		m.names = make([]string, 0, len(m.queues))
		for name := range m.queues {
			m.names = append(m.names, name)
		}
		slices.Sort(m.names)
	}
	return m.names
}

// Queued is one pending workload of a queue, in the heap or parked.
type Queued struct {
	*Entry
	Parked bool
}

// Ordered returns the queue's pending workloads, heap and parked, in
// queue order (Less). The entries are the queue's own: read only.
func (c *ClusterQueue) Ordered() []Queued {
	out := make([]Queued, 0, c.Len())
	for i := range c.heap.items {
		out = append(out, Queued{Entry: c.heap.items[i].entry})
	}
	for _, e := range c.parked {
		out = append(out, Queued{Entry: e, Parked: true})
	}
	slices.SortFunc(out, func(a, b Queued) int {
		if Less(a.Workload, b.Workload) {
			return -1
		}
		if Less(b.Workload, a.Workload) {
			return 1
		}
		return 0
	})
	return out
}
