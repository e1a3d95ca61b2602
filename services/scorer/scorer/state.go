package scorer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// ReasonNoFeasibleNode is the reason token of a podSet (or the rest of
// one) that no node can take; PodSetPlacement.Filter then says why.
const ReasonNoFeasibleNode = "NoFeasibleNode"

// Filter texts beyond scoring's filter reasons, for podSets that cannot be
// placed before any node is looked at.
const (
	FilterUnknownPodSet         = "UnknownPodSet"
	FilterUnknownFlavor         = "UnknownResourceFlavor"
	FilterConflictingNodeLabels = "ConflictingNodeLabels"
)

// State is what placement needs from the event log: every live workload's
// pods and every ResourceFlavor. It is folded from the log in order by
// Apply and is not safe for concurrent use.
type State struct {
	Flavors   map[string]*api.ResourceFlavor
	Workloads map[string]*Workload // by namespace/name
}

// Workload is one live workload as placement sees it.
type Workload struct {
	Ref events.WorkloadRef
	// PodSets are the pods of each podSet by name, without flavors.
	PodSets map[string]scoring.Pod
	// Admission is the ce-id of the QuotaReserved event that holds its
	// quota now; empty when it holds none.
	Admission string
	// PlacedFor is the ce-id of the admission its last Placed event answers.
	PlacedFor string
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Flavors: map[string]*api.ResourceFlavor{}, Workloads: map[string]*Workload{}}
}

// placedIDPrefix makes a Placed event's id from its QuotaReserved event's
// id, so that placing the same admission again is deduplicated.
const placedIDPrefix = "scorer/"

// PlacedID is the ce-id of the Placed event answering an admission.
func PlacedID(admissionID string) string { return placedIDPrefix + admissionID }

func key(r events.WorkloadRef) string { return api.NamespacedName(r.Namespace, r.Name) }

// Apply folds one event. An error is an event that cannot be understood
// (a workload that does not decode, a decision about a workload that never
// existed); the caller skips it and moves on, as the log is the truth and
// never rewritten. Admissions and evictions are published fenced on their
// workload's subject, so one about a workload the state does not hold is
// impossible; a Placed is not fenced and may follow a finish.
func (s *State) Apply(ev events.Event) error {
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		if d.Kind != api.KindResourceFlavor {
			return nil
		}
		objs, err := api.Decode(d.Object)
		if err != nil {
			return fmt.Errorf("ResourceFlavor %s: %w", d.Name, err)
		}
		if len(objs) != 1 {
			return fmt.Errorf("ResourceFlavor %s: %d objects", d.Name, len(objs))
		}
		rf, ok := objs[0].(*api.ResourceFlavor)
		if !ok {
			return fmt.Errorf("ResourceFlavor %s: payload is a %T", d.Name, objs[0])
		}
		s.Flavors[rf.Name] = rf
	case *events.ConfigRef:
		if d.Kind == api.KindResourceFlavor {
			delete(s.Flavors, d.Name)
		}
	case *events.WorkloadSubmittedData:
		wl, err := newWorkload(d)
		if err != nil {
			return err
		}
		s.Workloads[key(d.WorkloadRef)] = wl
	case *events.WorkloadFinishedData:
		delete(s.Workloads, key(d.WorkloadRef))
	case *events.WorkloadRef:
		if events.Ends(ev.Type) {
			delete(s.Workloads, key(*d))
		}
	case *events.QuotaReservedData:
		wl := s.Workloads[key(d.WorkloadRef)]
		if wl == nil {
			return fmt.Errorf("%s of unknown workload %s", ev.Type, key(d.WorkloadRef))
		}
		wl.Admission = ev.ID
	case *events.EvictedData:
		wl := s.Workloads[key(d.WorkloadRef)]
		if wl == nil {
			return fmt.Errorf("%s of unknown workload %s", ev.Type, key(d.WorkloadRef))
		}
		wl.Admission = ""
	case *events.ActiveChangedData:
		// A deactivated workload leaves its quota.
		if wl := s.Workloads[key(d.WorkloadRef)]; wl != nil && !d.Active {
			wl.Admission = ""
		}
	case *events.PlacedData:
		if wl := s.Workloads[key(d.WorkloadRef)]; wl != nil {
			wl.PlacedFor = strings.TrimPrefix(ev.ID, placedIDPrefix)
		}
	}
	return nil
}

func newWorkload(d *events.WorkloadSubmittedData) (*Workload, error) {
	objs, err := api.Decode(d.Workload)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", key(d.WorkloadRef), err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("workload %s: %d objects", key(d.WorkloadRef), len(objs))
	}
	w, ok := objs[0].(*api.Workload)
	if !ok {
		return nil, fmt.Errorf("workload %s: payload is a %T", key(d.WorkloadRef), objs[0])
	}
	wl := &Workload{Ref: d.WorkloadRef, PodSets: make(map[string]scoring.Pod, len(w.Spec.PodSets))}
	for i := range w.Spec.PodSets {
		ps := &w.Spec.PodSets[i]
		wl.PodSets[ps.Name] = podFromSpec(&ps.Template.Spec)
	}
	return wl, nil
}

// MaxRankedPods is the most pods Place ranks for one admission, over all
// its podSets. Ranking is one node choice per pod, so without a budget the
// work, the memory and the Placed event would grow with the podSet count
// (up to api.MaxPodSetCount); with it, a Placed event stays far below
// NATS's 1 MB message limit (8 podSets' worth of node names and scores).
// The pods beyond it are counted in PodSetPlacement.Unranked.
const MaxRankedPods = 1000

// Place decides where the pods of an admission go: for each podSet, in the
// admission's order, its admitted count of pods is placed greedily
// (scoring's Place) on nodes that carry the nodeLabels of every flavor
// assigned to the podSet and tolerate their taints, as Kueue injects them
// into the pods. The pods of earlier podSets count as requested when later
// ones are placed. A podSet whose pods do not all fit lists those that do
// and says why the rest does not. At most MaxRankedPods pods are ranked in
// all; the rest are counted as unranked. It is a pure function: nodes are
// not modified.
func Place(sc *scoring.Scorer, wl *Workload, flavors map[string]*api.ResourceFlavor, ad *scheduler.Admission, nodes []scoring.Node) []events.PodSetPlacement {
	work := slices.Clone(nodes)
	index := make(map[string]int, len(work))
	for i := range work {
		index[work[i].Name] = i
	}
	out := make([]events.PodSetPlacement, 0, len(ad.PodSets))
	budget := MaxRankedPods
	for _, psa := range ad.PodSets {
		psp := events.PodSetPlacement{Name: psa.Name}
		pod, filter := flavoredPod(wl, flavors, &psa)
		if filter != "" {
			psp.Reason, psp.Filter = ReasonNoFeasibleNode, filter
			out = append(out, psp)
			continue
		}
		charge := pod.Charge()
		ranked := min(max(int(psa.Count), 0), budget)
		for _, p := range sc.Place(&pod, ranked, work) {
			if p.Unschedulable != nil {
				psp.Reason, psp.Filter = ReasonNoFeasibleNode, filterText(p.Unschedulable)
				break
			}
			psp.Nodes = append(psp.Nodes, events.NodeScore(p.Score))
			n := &work[index[p.Node]]
			n.Requested = addCharge(n.Requested, charge)
		}
		budget -= ranked
		if psp.Reason == "" && int(psa.Count) > ranked {
			psp.Unranked = psa.Count - int32(ranked)
		}
		out = append(out, psp)
	}
	return out
}

// flavoredPod is the podSet's pod with its flavors applied, or a filter
// text saying why it cannot be placed at all.
func flavoredPod(wl *Workload, flavors map[string]*api.ResourceFlavor, psa *scheduler.PodSetAdmission) (scoring.Pod, string) {
	pod, ok := wl.PodSets[psa.Name]
	if !ok {
		return pod, FilterUnknownPodSet
	}
	resources := slices.Sorted(maps.Keys(psa.Flavors))
	seen := map[string]bool{}
	selector := map[string]string{}
	for _, r := range resources {
		name := psa.Flavors[r]
		if seen[name] {
			continue
		}
		seen[name] = true
		rf, ok := flavors[name]
		if !ok {
			return pod, FilterUnknownFlavor + " " + name
		}
		for _, k := range slices.Sorted(maps.Keys(rf.Spec.NodeLabels)) {
			if v, ok := selector[k]; ok && v != rf.Spec.NodeLabels[k] {
				return pod, FilterConflictingNodeLabels + " " + k
			}
			selector[k] = rf.Spec.NodeLabels[k]
		}
		pod = pod.WithFlavor(rf.Spec.NodeLabels, rf.Spec.Tolerations)
	}
	return pod, ""
}

// filterText names the filter that failed most: its reason token, and the
// resource for InsufficientResource.
func filterText(u *scoring.Unschedulable) string {
	if u.Resource != "" {
		return string(u.Reason) + " " + string(u.Resource)
	}
	return string(u.Reason)
}

// addCharge returns requested plus charge as a new map.
func addCharge(requested, charge scoring.Resources) scoring.Resources {
	out := make(scoring.Resources, len(requested)+len(charge))
	maps.Copy(out, requested)
	for name, v := range charge {
		out[name] += v
	}
	return out
}
