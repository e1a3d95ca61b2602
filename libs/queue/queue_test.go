package queue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func wl(key string, prio int32, ms int) *scheduler.Workload {
	return &scheduler.Workload{Key: key, ClusterQueue: "cq", Priority: prio,
		QueueTime: t0.Add(time.Duration(ms) * time.Millisecond), NamespaceLabels: labels.Set{}}
}

func TestQueueOrder(t *testing.T) {
	cases := []struct {
		name string
		in   []*scheduler.Workload
		want []string
	}{
		{"higher priority first", []*scheduler.Workload{wl("a/low", 0, 0), wl("a/high", 10, 5)}, []string{"a/high", "a/low"}},
		{"earlier queue time first among equal priority", []*scheduler.Workload{wl("a/late", 5, 9), wl("a/early", 5, 1)}, []string{"a/early", "a/late"}},
		{"negative priority after default", []*scheduler.Workload{wl("a/neg", -1, 0), wl("a/zero", 0, 1)}, []string{"a/zero", "a/neg"}},
		{"key breaks an exact tie", []*scheduler.Workload{wl("a/b", 1, 3), wl("a/a", 1, 3)}, []string{"a/a", "a/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			q := m.Queue("cq")
			q.Active = true
			for _, w := range tc.in {
				m.Push(&Entry{Workload: w}, true, t0)
			}
			var got []string
			for range tc.in {
				heads := m.Heads()
				got = append(got, heads[0].Key)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pop order (-want +got):\n%s", d)
			}
		})
	}
}

// TestRequeueParksOrRetries pins kueue-semantics §4.3: where a head that
// was not admitted goes, per strategy and reason.
func TestRequeueParksOrRetries(t *testing.T) {
	cases := []struct {
		name       string
		strategy   api.QueueingStrategy
		reason     scheduler.RequeueReason
		pendingFlv bool
		wantParked bool
	}{
		{"best effort: no fit parks", api.BestEffortFIFO, scheduler.RequeueGeneric, false, true},
		{"best effort: skipped in cycle retries", api.BestEffortFIFO, scheduler.RequeueFailedAfterNomination, false, false},
		{"best effort: pending preemption retries", api.BestEffortFIFO, scheduler.RequeuePendingPreemption, false, false},
		{"best effort: untried flavors retry", api.BestEffortFIFO, scheduler.RequeueGeneric, true, false},
		{"best effort: namespace mismatch parks", api.BestEffortFIFO, scheduler.RequeueNamespaceMismatch, false, true},
		{"strict: no fit retries (blocks the queue)", api.StrictFIFO, scheduler.RequeueGeneric, false, false},
		{"strict: namespace mismatch parks", api.StrictFIFO, scheduler.RequeueNamespaceMismatch, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			q := m.Queue("cq")
			q.Active, q.Strategy = true, tc.strategy
			w := wl("a/w", 0, 0)
			m.Push(&Entry{Workload: w}, true, t0)
			m.Heads()
			if tc.pendingFlv {
				w.LastTried = &scheduler.TriedFlavors{Index: nil}
				w.LastTried.Index = append(w.LastTried.Index, map[corev1.ResourceName]int{"cpu": 0})
			}
			m.Requeue(&Entry{Workload: w}, tc.reason, t0)
			if got := q.Parked("a/w"); got != tc.wantParked {
				t.Errorf("parked = %v, want %v", got, tc.wantParked)
			}
			if q.Len() != 1 {
				t.Errorf("queue holds %d workloads, want 1", q.Len())
			}
		})
	}
}

// TestQueueInadmissibleWakesTheCohort: a release in one queue retries the
// parked workloads of every queue of its cohort, and no other.
func TestQueueInadmissibleWakesTheCohort(t *testing.T) {
	m := NewManager()
	for _, n := range []struct{ name, cohort string }{{"a", "c"}, {"b", "c"}, {"x", ""}} {
		q := m.Queue(n.name)
		q.Active, q.Cohort, q.Strategy, q.Selector = true, n.cohort, api.BestEffortFIFO, labels.Everything()
		w := wl(n.name+"/w", 0, 0)
		w.ClusterQueue = n.name
		m.Push(&Entry{Workload: w}, true, t0)
	}
	for _, w := range m.Heads() {
		m.Requeue(&Entry{Workload: w}, scheduler.RequeueGeneric, t0)
	}
	m.QueueInadmissible("a", t0)
	got := map[string]bool{}
	for _, n := range []string{"a", "b", "x"} {
		got[n] = m.Lookup(n).Parked(n + "/w")
	}
	if d := cmp.Diff(map[string]bool{"a": false, "b": false, "x": true}, got); d != "" {
		t.Errorf("parked after QueueInadmissible(a) (-want +got):\n%s", d)
	}
}

// TestHeapPopsInLessOrder: after random pushes, re-pushes of changed
// workloads (a new info, as the engine replaces it), removals and pops,
// the heap pops exactly what Less orders first among what it holds, and
// every entry's position is where it sits.
func TestHeapPopsInLessOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 200 {
		h := entryHeap{index: map[string]*Entry{}}
		held := map[string]*scheduler.Workload{}
		for step := range 300 {
			key := fmt.Sprintf("ns/w%d", rng.IntN(60))
			switch rng.IntN(4) {
			case 0, 1:
				w := wl(key, int32(rng.IntN(4)), rng.IntN(5))
				h.upsert(&Entry{Workload: w})
				held[key] = w
			case 2:
				h.remove(key)
				delete(held, key)
			case 3:
				if len(held) == 0 {
					continue
				}
				var want *scheduler.Workload
				for _, w := range held {
					if want == nil || Less(w, want) {
						want = w
					}
				}
				got := h.pop().Workload
				if got != want {
					t.Fatalf("round %d step %d: popped %s, want %s", round, step, got.Key, want.Key)
				}
				delete(held, want.Key)
			}
			if len(h.items) != len(held) || len(h.index) != len(held) {
				t.Fatalf("round %d step %d: heap holds %d, index %d, want %d", round, step, len(h.items), len(h.index), len(held))
			}
			for i := range h.items {
				if e := h.items[i].entry; e.pos != i || held[e.Workload.Key] != e.Workload {
					t.Fatalf("round %d step %d: entry %s at %d says %d", round, step, e.Workload.Key, i, e.pos)
				}
			}
		}
	}
}

// TestCloneDrainsAsItsOriginal: a copy of a manager with random queues
// (heaps and parked entries) pops the same heads as the original, each
// the view the copy was given of it, and draining the copy first leaves
// the original whole.
func TestCloneDrainsAsItsOriginal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	m := NewManager()
	parked := 0
	for i := range 300 {
		cq := fmt.Sprint("cq", i%3)
		m.Queue(cq).Active = true
		w := wl(fmt.Sprint("a/w", i), int32(rng.IntN(4)), rng.IntN(50))
		w.ClusterQueue = cq
		if rng.IntN(4) == 0 {
			m.Park(&Entry{Workload: w})
			parked++
			continue
		}
		m.Push(&Entry{Workload: w}, true, t0)
	}
	copies := map[*scheduler.Workload]bool{}
	c := m.Clone(func(v *scheduler.Workload) *scheduler.Workload {
		cp := *v
		copies[&cp] = true
		return &cp
	})
	drain := func(m *Manager, want map[*scheduler.Workload]bool) []string {
		var out []string
		for {
			heads := m.Heads()
			if len(heads) == 0 {
				return out
			}
			for _, h := range heads {
				if want != nil && !want[h] {
					t.Fatalf("the copy popped %s's original view", h.Key)
				}
				out = append(out, h.Key)
			}
		}
	}
	got := drain(c, copies)
	if len(got) != 300-parked {
		t.Fatalf("the copy popped %d, want %d", len(got), 300-parked)
	}
	if d := cmp.Diff(drain(m, nil), got); d != "" {
		t.Errorf("the copy pops otherwise (-original +copy):\n%s", d)
	}
	for _, q := range c.queues {
		for _, e := range q.parked {
			if !copies[e.Workload] {
				t.Fatalf("parked %s holds the original's view", e.Workload.Key)
			}
		}
	}
}

// TestCloneLeavesOutWhatViewRefuses: entries whose view is nil are not in
// the copy, which pops the rest in the original's order.
func TestCloneLeavesOutWhatViewRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 0))
	m := NewManager()
	m.Queue("cq").Active = true
	for i := range 500 {
		m.Push(&Entry{Workload: wl(fmt.Sprint("a/w", i), int32(rng.IntN(4)), rng.IntN(80))}, true, t0)
	}
	for i := range 50 {
		m.Park(&Entry{Workload: wl(fmt.Sprint("a/p", i), 0, i)})
	}
	out := map[string]bool{}
	c := m.Clone(func(v *scheduler.Workload) *scheduler.Workload {
		if rng.IntN(3) == 0 {
			out[v.Key] = true
			return nil
		}
		return v
	})
	var want, got []string
	for {
		heads := m.Heads()
		if len(heads) == 0 {
			break
		}
		if k := heads[0].Key; !out[k] {
			want = append(want, k)
		}
	}
	for {
		heads := c.Heads()
		if len(heads) == 0 {
			break
		}
		got = append(got, heads[0].Key)
	}
	if len(got) == 500 || len(out) == 0 {
		t.Fatalf("nothing left out")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the copy pops otherwise than the original less what was left out (-want +got):\n%s", d)
	}
	for k := range c.Queue("cq").parked {
		if out[k] {
			t.Errorf("parked %s was left out and is in the copy", k)
		}
	}
}
