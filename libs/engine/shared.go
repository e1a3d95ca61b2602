package engine

import (
	"hash/maphash"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// maxShared bounds each table of what is shared (see shared and
// sharedRequests): past it the table starts over, and what was shared
// stays so.
const maxShared = 4096

// shared is ad, or an equal admission an admitted workload already holds.
// An admitted workload keeps its admission for as long as it runs, a few
// maps the collector marks on every cycle, and most admissions are alike
// (the same ClusterQueue, flavors and requests): equal ones share one.
// Every admission is read-only once made, so sharing is safe. A copy of
// the engine (Clone) starts with an empty table.
func (e *Engine) shared(ad scheduler.Admission) *scheduler.Admission {
	h := admissionHash(&ad)
	if c := e.admissions[h]; c != nil && sameAdmission(c, &ad) {
		return c
	}
	if e.admissions == nil || len(e.admissions) >= maxShared {
		e.admissions = make(map[uint64]*scheduler.Admission)
	}
	p := &ad
	e.admissions[h] = p
	return p
}

// shareSeed seeds the tables' hashes; they live only in memory.
var shareSeed = maphash.MakeSeed()

// admissionHash hashes what sameAdmission compares; map entries are
// summed, so that their order does not matter.
func admissionHash(ad *scheduler.Admission) uint64 {
	h := maphash.String(shareSeed, ad.ClusterQueue)
	for _, ps := range ad.PodSets {
		h = mix(h^maphash.String(shareSeed, ps.Name), uint64(ps.Count))
		var sum uint64
		for r, f := range ps.Flavors {
			sum += maphash.String(shareSeed, string(r)) ^ maphash.String(shareSeed, f)*31
		}
		for r, v := range ps.Usage {
			sum += mix(maphash.String(shareSeed, string(r)), uint64(v))
		}
		h = mix(h, sum)
	}
	return h
}

// mix combines a hash and a value (a multiply-xorshift step).
func mix(h, v uint64) uint64 {
	h = (h ^ v) * 0x9e3779b97f4a7c15
	return h ^ h>>32
}

// sameAdmission reports whether two admissions are equal, nil and empty
// maps and lists told apart as the encodings of an event tell them.
func sameAdmission(a, b *scheduler.Admission) bool {
	if a.ClusterQueue != b.ClusterQueue || len(a.PodSets) != len(b.PodSets) || (a.PodSets == nil) != (b.PodSets == nil) ||
		(a.Usage == nil) != (b.Usage == nil) || !maps.Equal(a.Usage, b.Usage) {
		return false
	}
	return slices.EqualFunc(a.PodSets, b.PodSets, func(x, y scheduler.PodSetAdmission) bool {
		return x.Name == y.Name && x.Count == y.Count && (x.Flavors == nil) == (y.Flavors == nil) && (x.Usage == nil) == (y.Usage == nil) &&
			maps.Equal(x.Flavors, y.Flavors) && maps.Equal(x.Usage, y.Usage)
	})
}

// sharedRequests is a podSet's per-pod requests, or an equal map another
// workload's podSet already holds: like admissions, they stay as long as
// the workload does, are most often alike, and are never written once
// built (PodSet.PerPod). nil stays nil.
func (e *Engine) sharedRequests(m map[corev1.ResourceName]int64) map[corev1.ResourceName]int64 {
	if m == nil {
		return nil
	}
	var h uint64
	for r, v := range m {
		h += mix(maphash.String(shareSeed, string(r)), uint64(v))
	}
	if c, ok := e.requests[h]; ok && maps.Equal(c, m) {
		return c
	}
	if e.requests == nil || len(e.requests) >= maxShared {
		e.requests = make(map[uint64]map[corev1.ResourceName]int64)
	}
	e.requests[h] = m
	return m
}

// shareRequests makes a workload's podSets hold shared requests.
func (e *Engine) shareRequests(info *scheduler.Workload) {
	for i := range info.PodSets {
		info.PodSets[i].PerPod = e.sharedRequests(info.PodSets[i].PerPod)
	}
}
