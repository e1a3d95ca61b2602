package events

import (
	"errors"
	"testing"
)

// TestCheckSourceByOwner: a decision is accepted from its owners only;
// an eviction's owners depend on its reason, and an InactiveWorkload
// eviction has two (podsready after the last PodsReady timeout, admission
// for an inactive workload its scheduler admitted). Requests are anyone's.
func TestCheckSourceByOwner(t *testing.T) {
	ref := WorkloadRef{Namespace: "ns", Name: "w"}
	evicted := func(reason string) *EvictedData { return &EvictedData{WorkloadRef: ref, Reason: reason} }
	cases := []struct {
		typ     Type
		data    any
		source  string
		refused bool
	}{
		{QuotaReserved, &QuotaReservedData{WorkloadRef: ref}, SourceAdmission, false},
		{QuotaReserved, &QuotaReservedData{WorkloadRef: ref}, SourcePodsReady, true},
		{Evicted, evicted("Preempted"), SourcePreemptor, false},
		{Evicted, evicted("Preempted"), SourceAdmission, true},
		{Evicted, evicted("PodsReadyTimeout"), SourcePodsReady, false},
		{Evicted, evicted("PodsReadyTimeout"), SourceAdmission, true},
		{Evicted, evicted("InactiveWorkload"), SourcePodsReady, false},
		{Evicted, evicted("InactiveWorkload"), SourceAdmission, false},
		{Evicted, evicted("InactiveWorkload"), SourcePreemptor, true},
		{Evicted, evicted("InactiveWorkload"), SourceIngest, true},
		{Evicted, evicted("ClusterQueueStopped"), SourceAdmission, false},
		{Evicted, evicted("ClusterQueueStopped"), SourcePodsReady, true},
		{Evicted, evicted("SomethingElse"), SourcePreemptor, false},
		{Evicted, evicted("SomethingElse"), SourceAdmission, true},
		{WorkloadSubmitted, &WorkloadSubmittedData{WorkloadRef: ref}, SourceIngest, false},
		{WorkloadSubmitted, &WorkloadSubmittedData{WorkloadRef: ref}, "anyone", false},
	}
	for _, c := range cases {
		err := CheckSource(Event{ID: "e1", Type: c.typ, Source: c.source, Data: c.data})
		if refused := errors.Is(err, ErrForeignSource); refused != c.refused || (err != nil && !refused) {
			t.Errorf("%s %+v from %s: %v, want refused %v", c.typ, c.data, c.source, err, c.refused)
		}
	}
	if got := (Event{Type: Evicted, Source: "x", Data: evicted("InactiveWorkload")}).FromOwner().Source; got != SourcePodsReady {
		t.Errorf("FromOwner of an InactiveWorkload eviction: %s, want %s", got, SourcePodsReady)
	}
}
