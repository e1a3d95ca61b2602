package events

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// evictionOwners are the owners of an Evicted by its reason (the
// engine's EvictedBy* values); the first is the one FromOwner stamps.
var evictionOwners = map[string][]string{
	"Preempted":        {SourcePreemptor},
	"PodsReadyTimeout": {SourcePodsReady},
	// A workload deactivated after its last PodsReady timeout leaves its
	// quota by podsready's eviction. An inactive workload that
	// admission's scheduler admits (a LocalQueue created after it lists
	// it, as Kueue's does) is evicted by admission, whose engine decides
	// it.
	"InactiveWorkload": {SourcePodsReady, SourceAdmission},
	// A HoldAndDrain ClusterQueue's workloads are evicted by admission,
	// whose engine decides it.
	"ClusterQueueStopped": {SourceAdmission},
	// So are a HoldAndDrain LocalQueue's.
	"LocalQueueStopped": {SourceAdmission},
}

// ErrForeignSource marks a decision event whose ce-source is not the
// service that owns its type.
var ErrForeignSource = errors.New("decision from a source that does not own it")

// Owner is the ce-source that may publish ev (the first, where two may),
// or "" when ev is not a decision (any of jetqueue's writers may publish
// it).
func Owner(ev Event) string {
	if o := owners(ev); len(o) > 0 {
		return o[0]
	}
	return ""
}

func owners(ev Event) []string {
	if d, ok := ev.Data.(*EvictedData); ok {
		if o, ok := evictionOwners[d.Reason]; ok {
			return o
		}
		return []string{SourcePreemptor}
	}
	if o := decisionOwners[ev.Type]; o != "" {
		return []string{o}
	}
	return nil
}

// CheckSource refuses a decision published by anyone but its owner: a
// decider applies such an event never, and skips it as it skips any event
// it cannot apply.
func CheckSource(ev Event) error {
	if o := owners(ev); len(o) > 0 && !slices.Contains(o, ev.Source) {
		return fmt.Errorf("%w: %s %s has ce-source %q, want %q", ErrForeignSource, ev.Type, ev.ID, ev.Source, strings.Join(o, `" or "`))
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
