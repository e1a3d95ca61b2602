package engine

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// The quiescence fingerprint (see RunToQuiescence) is the sum of one
// share per pending workload (and per finished workload still queued):
// a hash of its key, whether it is parked, and its retry state as its
// next attempt sees it. Each share is kept on its workload, and the sum
// on the engine from run to run, so that a run starts by rehashing only
// what changed since the last one ended:
//
//   - the workloads an event touched (touch), deleted ones included;
//   - the parked workloads an event sent back to their heaps (the
//     queues' unparked list);
//   - the shares hashed with a retry state in a cohort, or a queue
//     alone, that released quota or admitted a workload (releasedIn),
//     whose retry states either outdates (both grow a generation);
//   - the shares a run left for the next one (see RunToQuiescence).
//
// Anything else that changes shares (a configuration change, a cycle
// outside a run, a drain, a restored snapshot, a long replay without
// runs) invalidates the sum: the next run hashes every workload, as each
// run did before the sum was kept. Tests check the kept sum against a
// full fingerprint at the start of every run (checkFingerprint).

// checkFingerprint, set by tests, makes every run check the kept sum and
// shares against a full fingerprint.
var checkFingerprint bool

// startFingerprint is the fingerprint a run starts from: the kept sum
// brought up to date, or a full fingerprint when it is not kept.
func (e *Engine) startFingerprint() uint64 {
	e.epoch++
	unparked := e.queues.DrainUnparked()
	if !e.fpValid {
		e.fpValid = true
		return e.fingerprint()
	}
	fp := e.fpSum
	for i, w := range e.fpTouched {
		fp = e.rehashWorkload(fp, w)
		e.fpTouched[i] = nil
	}
	e.fpTouched = e.fpTouched[:0]
	for _, k := range unparked {
		fp = e.rehash(fp, k)
	}
	var groups []string
	for _, cq := range e.releasedIn {
		if g := e.triedGroup(cq); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	e.releasedIn = e.releasedIn[:0]
	var members []*Workload
	for _, g := range groups {
		members = members[:0]
		for _, w := range e.triedHashed[g] {
			members = append(members, w)
		}
		for _, w := range members {
			fp = e.rehashWorkload(fp, w)
		}
	}
	if checkFingerprint {
		e.checkFingerprint(fp)
	}
	return fp
}

// maxTouched bounds the workloads an engine remembers as touched beyond
// its pending ones, as when a service replays a long log without runs:
// past it the next run hashes everything.
const maxTouched = 4096

// touch notes that an event may have changed a workload's share.
func (e *Engine) touch(w *Workload) {
	if !e.fpValid {
		return
	}
	if len(e.fpTouched) >= maxTouched+len(e.pending) {
		e.invalidateFingerprint()
		return
	}
	e.fpTouched = append(e.fpTouched, w)
}

// invalidateFingerprint makes the next run hash every workload.
func (e *Engine) invalidateFingerprint() {
	e.fpValid = false
	clear(e.fpTouched)
	e.fpTouched = e.fpTouched[:0]
}

// rehashWorkload is rehash for a touched workload, which may have been
// deleted since: its share then leaves the sum.
func (e *Engine) rehashWorkload(fp uint64, w *Workload) uint64 {
	key := w.Info.Key
	if e.workloads[key] == w {
		return e.rehash(fp, key)
	}
	if w.hashEpoch == e.fpEpoch {
		fp -= w.hash
		w.hash = 0
	}
	if m := e.triedHashed[w.hashGroup]; m[key] == w {
		delete(m, key)
	}
	w.hashGroup = ""
	return fp
}

// checkFingerprint panics unless the kept sum, shares and retry-state
// groups are what a full fingerprint would compute.
func (e *Engine) checkFingerprint(fp uint64) {
	var sum uint64
	for _, set := range []map[string]*Workload{e.pending, e.finishedQueued} {
		for k, w := range set {
			h, tried := e.hashPending(w)
			sum += h
			if w.hashEpoch != e.fpEpoch || w.hash != h {
				panic(fmt.Sprintf("engine: fingerprint share of %s kept stale", k))
			}
			if tried && e.triedHashed[e.triedGroup(w.Info.ClusterQueue)][k] != w {
				panic(fmt.Sprintf("engine: %s missing from its retry-state group", k))
			}
		}
	}
	if sum != fp {
		panic(fmt.Sprintf("engine: kept fingerprint %x, full %x", fp, sum))
	}
	if e.cohortGens != nil {
		if fresh := e.countCohortGens(); !maps.Equal(fresh, e.cohortGens) {
			panic(fmt.Sprintf("engine: cohort generations kept %v, counted %v", e.cohortGens, fresh))
		}
	}
}

// rehash replaces a workload's share of the fingerprint. A share computed
// before the last full fingerprint (another epoch) is not in fp.
func (e *Engine) rehash(fp uint64, key string) uint64 {
	w := e.workloads[key]
	if w == nil {
		return fp
	}
	if w.hashEpoch == e.fpEpoch {
		fp -= w.hash
	}
	e.setHash(w)
	return fp + w.hash
}

// setHash stores a workload's share for the current epoch and keeps
// triedHashed: the shares that a release of quota or an admission may
// change.
func (e *Engine) setHash(w *Workload) {
	var tried bool
	w.hash, tried = e.hashPending(w)
	w.hashEpoch = e.fpEpoch
	g := ""
	if tried {
		g = e.triedGroup(w.Info.ClusterQueue)
	}
	if w.hashGroup != "" && w.hashGroup != g {
		delete(e.triedHashed[w.hashGroup], w.Info.Key)
	}
	w.hashGroup = g
	if g != "" {
		m := e.triedHashed[g]
		if m == nil {
			m = map[string]*Workload{}
			e.triedHashed[g] = m
		}
		m[w.Info.Key] = w
	}
}

// triedGroup is whose release of quota or admission outdates the retry
// states of a ClusterQueue's workloads (see currentTried): its cohort's
// members, or the queue alone. A NUL, which no name holds, tells a queue
// from a cohort.
func (e *Engine) triedGroup(cq string) string {
	if c := e.clusterQueues[cq]; c != nil && c.Spec.Cohort != "" {
		return c.Spec.Cohort
	}
	return "\x00" + cq
}

// fingerprint hashes what the next cycle depends on: which pending
// workloads are in a heap or parked, and their retry state.
func (e *Engine) fingerprint() uint64 {
	e.fpEpoch++
	// Emptied rather than dropped: a run refills them with about as many
	// shares, and growing them again is most of the cost of a backlog.
	for _, m := range e.triedHashed {
		clear(m)
	}
	e.releasedIn = e.releasedIn[:0]
	var sum uint64
	for _, w := range e.pending {
		e.setHash(w)
		sum += w.hash
	}
	for _, w := range e.finishedQueued {
		e.setHash(w)
		sum += w.hash
	}
	return sum
}

// FNV-1a, inlined so that hashing a head allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

// hashPending is a workload's share of the fingerprint, and whether it
// covers a retry state.
func (e *Engine) hashPending(w *Workload) (uint64, bool) {
	if w.Status != Pending && (w.Status != Finished && w.Status != Inactive || w.queuedIn == "") {
		// A finished or inactive workload counts while a queue holds it.
		return 0, false
	}
	if w.keyHash == 0 {
		w.keyHash = fnvString(fnvOffset, w.Info.Key)
	}
	h := w.keyHash
	if q := e.queues.Lookup(w.queuedIn); q != nil && q.Parked(w.Info.Key) {
		h = fnvByte(fnvByte(h, 0), 'p')
	}
	t := e.currentTried(w)
	if t == nil {
		return h, false
	}
	if w.triedFor != t || w.triedFrom != h {
		w.triedFor, w.triedFrom, w.triedHash = t, h, hashTried(h, t, &e.resBuf)
	}
	return w.triedHash, true
}

// hashTried continues h with a retry state's flavor indexes, in podSet
// then resource order.
func hashTried(h uint64, t *scheduler.TriedFlavors, buf *[]corev1.ResourceName) uint64 {
	for _, ps := range t.Index {
		keys := (*buf)[:0]
		for r := range ps {
			keys = append(keys, r)
		}
		slices.Sort(keys)
		for _, r := range keys {
			h = fnvByte(fnvString(h, string(r)), byte(ps[r]+2))
		}
		*buf = keys
		h = fnvByte(h, ';')
	}
	return h
}

// currentTried is a pending workload's retry state as its next attempt
// sees it: nil once its ClusterQueue or cohort released quota or admitted
// a workload since the state was computed (the flavor assigner then
// starts over, as Kueue's lastAssignmentOutdated). Two states that differ
// only there are not the same state.
func (e *Engine) currentTried(w *Workload) *scheduler.TriedFlavors {
	t := w.Info.LastTried
	cq := e.clusterQueues[w.Info.ClusterQueue]
	if t == nil || cq == nil || e.inactive[cq.Name] != "" {
		return t
	}
	if e.state(cq.Name).generation > t.ClusterQueueGen {
		return nil
	}
	if co := cq.Spec.Cohort; co != "" && e.cohortGeneration(co) > t.CohortGen {
		return nil
	}
	return t
}

// cohortGeneration is the sum of the active member queues' generations,
// as the scheduler's snapshot counts it; cached until a release, an
// admission or a configuration change.
func (e *Engine) cohortGeneration(cohort string) int64 {
	if e.cohortGens == nil {
		e.cohortGens = e.countCohortGens()
	}
	return e.cohortGens[cohort]
}

// countCohortGens sums each cohort's active members' generations.
func (e *Engine) countCohortGens() map[string]int64 {
	gens := map[string]int64{}
	for name, cq := range e.clusterQueues {
		if c := cq.Spec.Cohort; c != "" && e.inactive[name] == "" {
			gens[c] += e.state(name).generation
		}
	}
	return gens
}
