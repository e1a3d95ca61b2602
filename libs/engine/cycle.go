package engine

import (
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/jetqueue/jetqueue/libs/queue"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// CycleResult is what one cycle changed.
type CycleResult struct {
	Heads    int
	Admitted []string
	Entries  []scheduler.Entry
}

// Cycle runs one scheduling cycle: pop the heads, decide over a snapshot,
// apply the decisions.
func (e *Engine) Cycle(now time.Time) CycleResult {
	heads := e.queues.Heads()
	if len(heads) == 0 {
		return CycleResult{}
	}
	entries := scheduler.Schedule(e.Snapshot(), heads)
	res := CycleResult{Heads: len(heads), Entries: entries}
	for i := range entries {
		en := &entries[i]
		w := e.workloads[en.Workload.Key]
		if en.Outcome == scheduler.Admitted {
			e.admit(w, en.Admission(), now)
			res.Admitted = append(res.Admitted, w.Info.Key)
			continue
		}
		w.Reason = en.Reason
		w.Info.LastTried = en.Tried
		e.queues.Requeue(&queue.Entry{Workload: w.Info}, en.Requeue, now)
	}
	return res
}

func (e *Engine) admit(w *Workload, ad scheduler.Admission, now time.Time) {
	st := e.state(ad.ClusterQueue)
	st.admitted[w.Info.Key] = w
	st.total.Add(ad.Usage)
	w.queuedIn = ""
	w.Status = Admitted
	w.Admission = &ad
	w.AdmittedAt = now
	w.Reason = nil
	w.Info.LastTried = nil
}

// MaxCycles bounds RunToQuiescence; reaching it means a bug, not a load.
const MaxCycles = 1_000_000

// RunToQuiescence repeats cycles until nothing is admitted and the queues
// with every pending workload's retry state are back in a state seen since
// the last admission (FORMAT.md: a retry state may cycle with period two or
// more). It returns the number of cycles run.
func (e *Engine) RunToQuiescence(now time.Time) int {
	seen := map[uint64]bool{e.fingerprint(): true}
	for n := 1; n <= MaxCycles; n++ {
		res := e.Cycle(now)
		if len(res.Admitted) > 0 {
			seen = map[uint64]bool{e.fingerprint(): true}
			continue
		}
		fp := e.fingerprint()
		if seen[fp] {
			return n
		}
		seen[fp] = true
	}
	return MaxCycles
}

// fingerprint hashes what the next cycle depends on: which pending
// workloads are in a heap or parked, and their retry state.
func (e *Engine) fingerprint() uint64 {
	h := fnv.New64a()
	var buf []byte
	keys := make([]string, 0, len(e.workloads))
	for k, w := range e.workloads {
		if w.Status == Pending {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := e.workloads[k]
		buf = append(buf[:0], k...)
		buf = append(buf, 0)
		if q := e.queues.Lookup(w.Info.ClusterQueue); q != nil && q.Parked(k) {
			buf = append(buf, 'p')
		}
		if t := w.Info.LastTried; t != nil {
			for _, ps := range t.Index {
				for _, r := range slices.Sorted(maps.Keys(ps)) {
					buf = append(buf, r...)
					buf = append(buf, byte(ps[r]+2))
				}
				buf = append(buf, ';')
			}
		}
		h.Write(buf)
	}
	return h.Sum64()
}
