package bridge

// Snapshots (libs/snapshot). The bridge's state is a fold of the log and
// nothing else (its writes to Jobs and to the API are not in it until
// their events are read back), so the follower encodes it whenever the
// policy says so, once it has caught up; a new term restores the newest
// usable snapshot and reads from Jq-Seq+1. Reconciling still starts
// with every Job and every workload of the restored state, as after a
// full replay.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// SnapshotName is the bridge's object in JQ_SNAPSHOTS: its lease key
// (kube-bridge) and its one shard.
const SnapshotName = "kube-bridge-0"

// snapshotVersion is the version of the bridge's encoding below.
const snapshotVersion = 1

type snapWorkload struct {
	Key         string               `json:"key"`
	SubmitID    string               `json:"submitID"`
	UID         string               `json:"uid,omitempty"`
	Admission   *scheduler.Admission `json:"admission,omitempty"`
	AdmittedSeq uint64               `json:"admittedSeq,omitempty"`
	PodsReady   bool                 `json:"podsReady,omitempty"`
	Finished    bool                 `json:"finished,omitempty"`
	Inactive    bool                 `json:"inactive,omitempty"`
	EvictedBy   string               `json:"evictedBy,omitempty"`
}

type snapState struct {
	Workloads []snapWorkload                    `json:"workloads,omitempty"`
	Flavors   map[string]api.ResourceFlavorSpec `json:"flavors,omitempty"`
}

// encode renders the state, workloads in key order.
func (s *state) encode() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := snapState{Flavors: s.flavors}
	keys := mapsKeys(s.workloads)
	slices.Sort(keys)
	for _, k := range keys {
		w := s.workloads[k]
		out.Workloads = append(out.Workloads, snapWorkload{Key: k, SubmitID: w.submitID, UID: w.uid, Admission: w.admission,
			AdmittedSeq: w.admittedSeq, PodsReady: w.podsReady, Finished: w.finished, Inactive: w.inactive, EvictedBy: w.evictedBy})
	}
	return json.Marshal(&out)
}

// decodeState returns the state a snapshot at seq describes, checked: a
// key is namespace/name and appears once, an admission is no later than
// the snapshot and PodsReady needs one.
func decodeState(sn *snapshot.Snapshot) (*state, error) {
	var in snapState
	if err := json.Unmarshal(sn.Payload, &in); err != nil {
		return nil, fmt.Errorf("bridge snapshot: %w", err)
	}
	st := newState()
	for _, w := range in.Workloads {
		ns, name, ok := strings.Cut(w.Key, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("bridge snapshot: workload key %q", w.Key)
		}
		if _, dup := st.workloads[w.Key]; dup {
			return nil, fmt.Errorf("bridge snapshot: workload %s listed twice", w.Key)
		}
		if w.AdmittedSeq > sn.Seq || (w.PodsReady && w.Admission == nil) {
			return nil, fmt.Errorf("bridge snapshot: workload %s: admission at %d (snapshot at %d), podsReady %v", w.Key, w.AdmittedSeq, sn.Seq, w.PodsReady)
		}
		st.workloads[w.Key] = workload{submitID: w.SubmitID, uid: w.UID, admission: w.Admission, admittedSeq: w.AdmittedSeq,
			podsReady: w.PodsReady, finished: w.Finished, inactive: w.Inactive, evictedBy: w.EvictedBy}
	}
	if in.Flavors != nil {
		st.flavors = in.Flavors
	}
	return st, nil
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
