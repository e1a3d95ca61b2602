package bridge

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// workload is what the event log says about one workload, as far as its
// Job cares: whether it exists, which submission it is, and whether it
// holds quota right now.
type workload struct {
	// submitID is the ce-id of the WorkloadSubmitted event, which tells
	// the bridge's own submissions from others (see Config.SubmissionID).
	submitID string
	// uid is the workload's uid: the Job's, for a Job the bridge submitted.
	uid string
	// admission is set from QuotaReserved until the workload loses its
	// quota (Evicted, Deactivated) or finishes; admittedSeq is the stream
	// sequence of that QuotaReserved, which tells one admission from the
	// next even when both chose the same flavors.
	admission   *scheduler.Admission
	admittedSeq uint64
	podsReady   bool
	finished    bool
	inactive    bool
	// evictedBy is the reason of the last eviction, for the Job's Event.
	evictedBy string
}

// state folds JQ_EVENTS into the latest state of every workload and the
// spec of every ResourceFlavor. It is safe for concurrent use: the
// follower writes, the reconcile workers read copies.
type state struct {
	mu        sync.Mutex
	workloads map[string]workload // by namespace/name
	flavors   map[string]api.ResourceFlavorSpec
}

func newState() *state {
	return &state{workloads: map[string]workload{}, flavors: map[string]api.ResourceFlavorSpec{}}
}

// apply folds one event and returns the key of the workload it concerns
// ("" for config events). An event about a workload the log never
// submitted (or deleted before) is an error: every writer of a workload
// event fences it on the workload's subject, so it is impossible content,
// which the caller skips by the services' rule.
func (s *state) apply(seq uint64, ev events.Event) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		if d.Kind == api.KindResourceFlavor {
			var rf api.ResourceFlavor
			if json.Unmarshal(d.Object, &rf) == nil {
				s.flavors[d.Name] = rf.Spec
			}
		}
		return "", nil
	case *events.ConfigRef:
		if ev.Type == events.ConfigDeleted && d.Kind == api.KindResourceFlavor {
			delete(s.flavors, d.Name)
		}
		return "", nil
	case *events.WorkloadSubmittedData:
		var meta struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(d.Workload, &meta)
		key := d.Namespace + "/" + d.Name
		s.workloads[key] = workload{submitID: ev.ID, uid: meta.Metadata.UID}
		return key, nil
	}
	ref, ok := workloadRef(ev.Data)
	if !ok {
		return "", nil
	}
	key := ref.Namespace + "/" + ref.Name
	w, ok := s.workloads[key]
	if !ok {
		return "", fmt.Errorf("%s about unknown workload %s", ev.Type, key)
	}
	switch ev.Type {
	case events.WorkloadDeleted, events.WorkloadExpired:
		// An expired workload was finished: its Job, if still there, is
		// done, and reconcile leaves a finished Job it does not know alone.
		delete(s.workloads, key)
		return key, nil
	case events.QuotaReserved:
		adm := ev.Data.(*events.QuotaReservedData).Admission
		w.admission, w.admittedSeq, w.podsReady, w.inactive = &adm, seq, false, false
	case events.PodsReady:
		if w.admission != nil {
			w.podsReady = true
		}
	case events.Evicted:
		w.admission, w.podsReady, w.evictedBy = nil, false, ev.Data.(*events.EvictedData).Reason
	case events.Deactivated:
		w.admission, w.podsReady, w.inactive = nil, false, true
	case events.ActiveChanged:
		if ev.Data.(*events.ActiveChangedData).Active {
			w.inactive = false
		} else if !w.finished {
			w.admission, w.podsReady, w.inactive = nil, false, true
		}
	case events.WorkloadFinished:
		w.admission, w.podsReady, w.finished = nil, false, true
	default:
		return "", nil
	}
	s.workloads[key] = w
	return key, nil
}

// workloadRef finds the workload a workload event is about.
func workloadRef(data any) (events.WorkloadRef, bool) {
	switch d := data.(type) {
	case *events.WorkloadRef:
		return *d, true
	case *events.ActiveChangedData:
		return d.WorkloadRef, true
	case *events.QuotaReservedData:
		return d.WorkloadRef, true
	case *events.EvictedData:
		return d.WorkloadRef, true
	case *events.WorkloadFinishedData:
		return d.WorkloadRef, true
	}
	return events.WorkloadRef{}, false
}

// get returns a copy of one workload's state.
func (s *state) get(key string) (workload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[key]
	return w, ok
}

// flavorSpecs returns the specs of the named flavors; unknown names are
// left out.
func (s *state) flavorSpecs(names []string) map[string]api.ResourceFlavorSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]api.ResourceFlavorSpec, len(names))
	for _, n := range names {
		if f, ok := s.flavors[n]; ok {
			out[n] = f
		}
	}
	return out
}

// keys lists every workload the log knows.
func (s *state) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.workloads))
	for k := range s.workloads {
		out = append(out, k)
	}
	return out
}
