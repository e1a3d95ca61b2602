package queue

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// State is one ClusterQueue's pending queue as plain values, for a
// snapshot of the engine that owns the manager: its settings, its pop
// counters and the workloads in its heap and parked, each list in key
// order. The heap's layout is not kept: its order (Less) is total, so a
// heap rebuilt from the same entries pops the same way.
type State struct {
	Name              string
	Cohort            string
	Strategy          api.QueueingStrategy
	Selector          labels.Selector
	Active            bool
	PopCycle          int64
	InadmissibleCycle int64
	Heap              []*Entry
	Parked            []*Entry
}

// States returns every queue's state, in name order. The entries are the
// manager's own: they must not be modified.
func (m *Manager) States() []State {
	out := make([]State, 0, len(m.queues))
	for _, name := range m.sortedNames() {
		q := m.queues[name]
		st := State{Name: q.Name, Cohort: q.Cohort, Strategy: q.Strategy, Selector: q.Selector, Active: q.Active,
			PopCycle: q.popCycle, InadmissibleCycle: q.inadmissibleCycle}
		st.Heap = q.heap.entries()
		slices.SortFunc(st.Heap, byKey)
		for _, e := range q.parked {
			st.Parked = append(st.Parked, e)
		}
		slices.SortFunc(st.Parked, byKey)
		out = append(out, st)
	}
	return out
}

// Unparked returns the workloads moved back from parked since the last
// DrainUnparked, without draining them.
func (m *Manager) Unparked() []string { return slices.Clone(m.unparked) }

// Restore replaces the manager's queues with states (as States returned
// them) and its record of unparked workloads. A key held twice, in one
// queue or two, is refused: a manager never holds a workload twice.
func (m *Manager) Restore(states []State, unparked []string) error {
	queues := make(map[string]*ClusterQueue, len(states))
	entries := 0
	for _, st := range states {
		entries += len(st.Heap) + len(st.Parked)
	}
	// Sized up front: a restore of a large backlog spent more on growing
	// these maps than on filling them.
	seen := make(map[string]string, entries)
	for _, st := range states {
		if _, dup := queues[st.Name]; dup {
			return fmt.Errorf("queue %s: listed twice", st.Name)
		}
		q := newClusterQueue(st.Name)
		q.Cohort, q.Strategy, q.Selector, q.Active = st.Cohort, st.Strategy, st.Selector, st.Active
		q.popCycle, q.inadmissibleCycle = st.PopCycle, st.InadmissibleCycle
		for _, list := range [][]*Entry{st.Heap, st.Parked} {
			for _, e := range list {
				if e == nil || e.Workload == nil {
					return fmt.Errorf("queue %s: an entry without a workload", st.Name)
				}
				k := e.Workload.Key
				if other, dup := seen[k]; dup {
					return fmt.Errorf("queue %s: workload %s is also in queue %s", st.Name, k, other)
				}
				seen[k] = st.Name
			}
		}
		q.heap.grow(len(st.Heap))
		if len(st.Parked) > 0 {
			q.parked = make(map[string]*Entry, len(st.Parked))
		}
		for _, e := range st.Heap {
			q.heap.upsert(e)
		}
		for _, e := range st.Parked {
			q.parked[e.Workload.Key] = e
		}
		queues[st.Name] = q
	}
	m.queues, m.names = queues, nil
	m.unparked = slices.Clone(unparked)
	return nil
}

func byKey(a, b *Entry) int {
	switch {
	case a.Workload.Key < b.Workload.Key:
		return -1
	case a.Workload.Key > b.Workload.Key:
		return 1
	}
	return 0
}

// Clone copies the manager: its queues with their settings and counters,
// and entries of their own (an entry records its place in its heap),
// each holding view of its workload; an entry whose view is nil is left
// out. The heaps keep their layout, so a copy is neither sorted nor
// sifted, unless entries were left out of it (then it is heapified
// afresh), and the manager is only read.
func (m *Manager) Clone(view func(*scheduler.Workload) *scheduler.Workload) *Manager {
	c := &Manager{queues: make(map[string]*ClusterQueue, len(m.queues)), names: slices.Clone(m.names),
		unparked: slices.Clone(m.unparked)}
	for name, q := range m.queues {
		cq := *q
		cq.heap = entryHeap{items: make([]heapItem, 0, len(q.heap.items)), index: make(map[string]*Entry, len(q.heap.items))}
		for _, it := range q.heap.items {
			v := view(it.entry.Workload)
			if v == nil {
				continue
			}
			e := &Entry{Workload: v, NotBefore: it.entry.NotBefore, pos: len(cq.heap.items)}
			it.entry = e
			cq.heap.items = append(cq.heap.items, it)
			cq.heap.index[e.Workload.Key] = e
		}
		if len(cq.heap.items) < len(q.heap.items) {
			cq.heap.heapify()
		}
		cq.parked = make(map[string]*Entry, len(q.parked))
		for key, e := range q.parked {
			if v := view(e.Workload); v != nil {
				cq.parked[key] = &Entry{Workload: v, NotBefore: e.NotBefore}
			}
		}
		c.queues[name] = &cq
	}
	return c
}
