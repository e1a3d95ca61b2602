package events

import (
	"errors"
	"fmt"
)

// The ce-source of each of jetqueue's writers.
const (
	SourceIngest    = "jetqueue/ingest"
	SourceAdmission = "jetqueue/admission"
	SourcePreemptor = "jetqueue/preemptor"
	SourcePodsReady = "jetqueue/podsready"
	SourceScorer    = "jetqueue/scorer"
	// SourceRetention expires finished workloads (libs/retention; the
	// role runs in ingest under the retention lease).
	SourceRetention = "jetqueue/retention"
)

// decisionOwners names, for each decision type, the one service that
// decides it. The NATS server's permissions keep non-services off
// JQ_EVENTS; this keeps one service from deciding for another (a bug, a
// tool replaying events under its own name, a misrouted publish), so that
// what a decider applies is what the decision's owner decided.
//
// The types ingest writes (submissions, config, finish, delete, priority,
// podsready) are requests, not decisions: they are checked where they
// enter, by ingest, and deciders take them from the log as they are.
var decisionOwners = map[Type]string{
	QuotaReserved:       SourceAdmission,
	Inadmissible:        SourceAdmission,
	PreemptionRequested: SourceAdmission,
	BatchClosed:         SourceAdmission,
	ShardReleased:       SourceAdmission,
	Requeued:            SourcePodsReady,
	Deactivated:         SourcePodsReady,
	Placed:              SourceScorer,
	WorkloadExpired:     SourceRetention,
	// Only podsready's batches (one instant's timers) are published
	// fenced event by event, so only it stands in for a refused member;
	// admission's and ingest's batches are atomic.
	BatchSkipped: SourcePodsReady,
	// Evicted has two owners, told apart by reason (evictionOwners).
}

// evictionOwners is the owner of an Evicted by its reason (the engine's
// EvictedBy* values).
var evictionOwners = map[string]string{
	"Preempted":        SourcePreemptor,
	"PodsReadyTimeout": SourcePodsReady,
	// A workload deactivated after its last PodsReady timeout leaves its
	// quota by podsready's eviction.
	"InactiveWorkload": SourcePodsReady,
	// A HoldAndDrain ClusterQueue's workloads are evicted by admission,
	// whose engine decides it.
	"ClusterQueueStopped": SourceAdmission,
	// So are a HoldAndDrain LocalQueue's.
	"LocalQueueStopped": SourceAdmission,
}

// ErrForeignSource marks a decision event whose ce-source is not the
// service that owns its type.
var ErrForeignSource = errors.New("decision from a source that does not own it")

// Owner is the ce-source that may publish ev, or "" when ev is not a
// decision (any of jetqueue's writers may publish it).
func Owner(ev Event) string {
	switch d := ev.Data.(type) {
	case *EvictedData:
		if o, ok := evictionOwners[d.Reason]; ok {
			return o
		}
		return SourcePreemptor
	}
	return decisionOwners[ev.Type]
}

// CheckSource refuses a decision published by anyone but its owner: a
// decider applies such an event never, and skips it as it skips any event
// it cannot apply.
func CheckSource(ev Event) error {
	if o := Owner(ev); o != "" && ev.Source != o {
		return fmt.Errorf("%w: %s %s has ce-source %q, want %q", ErrForeignSource, ev.Type, ev.ID, ev.Source, o)
	}
	return nil
}

// FromOwner is e as its owner would publish it: a decision's Source is
// its owner's; anything else is unchanged. Tests that stand in for a
// service use it.
func (e Event) FromOwner() Event {
	if o := Owner(e); o != "" {
		e.Source = o
	}
	return e
}
