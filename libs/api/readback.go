package api

import (
	"encoding/json"
)

// serverMetadata are the metadata fields a server sets: an object read
// back from jetqueue (or exported from Kubernetes) carries them, and
// applying it again ignores them, as kubectl apply does.
var serverMetadata = []string{"resourceVersion", "creationTimestamp", "generation", "managedFields",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// readBackKinds are the kinds whose read-back form (status and
// server-set metadata) is accepted and ignored, so that
// `jqctl get cq x -o yaml | jqctl apply -f -` round-trips, and a Workload
// exported from Kubernetes (`kubectl get workload -o yaml`, with its
// status) can be submitted: what it was admitted to there is not carried
// over, jetqueue decides afresh.
var readBackKinds = map[string]bool{KindResourceFlavor: true, KindClusterQueue: true, KindLocalQueue: true, KindWorkload: true,
	KindWorkloadPriorityClass: true, KindPriorityClass: true, KindConfiguration: true}

// dropServerFields removes from a configuration document what a server
// writes: status, and the server-set metadata (a Configuration has no
// metadata of its own, so jetqueue's read-back name goes too). It
// returns the document without them, and whether anything was removed.
func dropServerFields(kind string, top map[string]json.RawMessage) ([]byte, bool) {
	if !readBackKinds[kind] {
		return nil, false
	}
	changed := false
	if _, ok := top["status"]; ok {
		delete(top, "status")
		changed = true
	}
	if raw, ok := top["metadata"]; ok {
		if kind == KindConfiguration {
			delete(top, "metadata")
			changed = true
		} else {
			var md map[string]json.RawMessage
			if json.Unmarshal(raw, &md) == nil {
				dropped := false
				for _, f := range serverMetadata {
					if _, ok := md[f]; ok {
						delete(md, f)
						dropped = true
					}
				}
				if dropped {
					top["metadata"], _ = json.Marshal(md)
					changed = true
				}
			}
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(top)
	if err != nil {
		return nil, false
	}
	return b, true
}
