package scorer

// Snapshots (libs/snapshot). The follower's State is a fold of the log and
// nothing else, so it is encoded whenever the policy says so, once the
// follower has caught up; on start the follower restores the newest usable
// snapshot and reads from Jq-Seq+1. Every replica writes the same fold to
// the one object SnapshotName (a snapshot never goes back).

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// SnapshotName is the scorer's object in JQ_SNAPSHOTS: it has one shard.
const SnapshotName = "scorer-0"

// snapshotVersion is the version of the encoding below.
const snapshotVersion = 1

type snapState struct {
	Flavors   []*api.ResourceFlavor `json:"flavors,omitempty"`
	Workloads []*Workload           `json:"workloads,omitempty"`
}

// encode renders the state, flavors and workloads in key order.
func (s *State) encode() ([]byte, error) {
	var out snapState
	names := make([]string, 0, len(s.Flavors))
	for n := range s.Flavors {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out.Flavors = append(out.Flavors, s.Flavors[n])
	}
	keys := make([]string, 0, len(s.Workloads))
	for k := range s.Workloads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out.Workloads = append(out.Workloads, s.Workloads[k])
	}
	return json.Marshal(&out)
}

// decodeState returns the state a snapshot describes, checked: every
// flavor and workload is named, and none appears twice.
func decodeState(data []byte) (*State, error) {
	var in snapState
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("scorer snapshot: %w", err)
	}
	st := NewState()
	for _, rf := range in.Flavors {
		if rf == nil || rf.Name == "" || st.Flavors[rf.Name] != nil {
			return nil, fmt.Errorf("scorer snapshot: a flavor unnamed or listed twice")
		}
		st.Flavors[rf.Name] = rf
	}
	for _, w := range in.Workloads {
		if w == nil || w.Ref.Namespace == "" || w.Ref.Name == "" {
			return nil, fmt.Errorf("scorer snapshot: a workload without a name")
		}
		k := key(w.Ref)
		if st.Workloads[k] != nil {
			return nil, fmt.Errorf("scorer snapshot: workload %s listed twice", k)
		}
		st.Workloads[k] = w
	}
	return st, nil
}

// restore replaces the follower's state with a snapshot's, or leaves it
// and returns why not.
func (f *follower) restore(sn *snapshot.Snapshot) error {
	st, err := decodeState(sn.Payload)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state, f.applied = st, sn.Seq
	return nil
}
