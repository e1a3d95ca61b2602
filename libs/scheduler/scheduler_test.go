package scheduler

import (
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
)

// TestTryNextFlavor is KEP-582's table (kueue-semantics §6.5).
func TestTryNextFlavor(t *testing.T) {
	borrow, tryNext := api.FungibilityBorrow, api.FungibilityTryNextFlavor
	preempt := api.FungibilityPreempt
	cases := []struct {
		mode        Mode
		borrows     bool
		canBorrow   api.FlavorFungibilityPolicy
		canPreempt  api.FlavorFungibilityPolicy
		wantTryNext bool
	}{
		{Fit, false, tryNext, tryNext, false},
		{Fit, true, borrow, tryNext, false},
		{Fit, true, tryNext, tryNext, true},
		{Preempt, false, borrow, preempt, false},
		{Preempt, true, borrow, preempt, false},
		{Preempt, true, tryNext, preempt, true},
		{Preempt, false, borrow, tryNext, true},
		{Preempt, true, borrow, tryNext, true},
		{NoFit, false, borrow, preempt, true},
	}
	for _, tc := range cases {
		got := tryNextFlavor(tc.mode, api.FlavorFungibility{WhenCanBorrow: tc.canBorrow, WhenCanPreempt: tc.canPreempt}, tc.borrows)
		if got != tc.wantTryNext {
			t.Errorf("%v borrow=%v whenCanBorrow=%s whenCanPreempt=%s: tryNext=%v, want %v",
				tc.mode, tc.borrows, tc.canBorrow, tc.canPreempt, got, tc.wantTryNext)
		}
	}
}

func ptr(v int64) *int64 { return &v }

// TestFitsQuota pins Kueue's fitsResourceQuota (kueue-semantics §6.4) for a
// queue alone and in a cohort.
func TestFitsQuota(t *testing.T) {
	fr := quota.FlavorResource{Flavor: "f", Resource: "cpu"}
	alone := func(nominal, used int64, bl *int64) *ClusterQueue {
		return &ClusterQueue{Name: "q", Limits: map[quota.FlavorResource]quota.Limits{fr: {Nominal: nominal, BorrowingLimit: bl}},
			Usage: quota.Usage{fr: used}}
	}
	inCohort := func(nominal, used int64, bl *int64, othersLend, othersUsedAbove int64) *ClusterQueue {
		cq := alone(nominal, used, bl)
		cq.Cohort = &Cohort{Name: "c", Requestable: quota.Usage{fr: nominal + othersLend}, Used: quota.Usage{fr: used + othersUsedAbove}}
		return cq
	}
	cases := []struct {
		name       string
		cq         *ClusterQueue
		val        int64
		wantMode   Mode
		wantBorrow bool
		wantToken  string
	}{
		{"fits nominal exactly", alone(5000, 0, nil), 5000, Fit, false, ""},
		{"used quota: wait (preempt mode)", alone(5000, 3000, nil), 3000, Preempt, false, WaitingForQuota},
		{"above nominal alone: never", alone(5000, 0, nil), 6000, NoFit, false, ExceedsMaxQuota},
		{"borrows unused cohort quota", inCohort(5000, 0, nil, 5000, 0), 8000, Fit, true, ""},
		{"cohort full: borrower waits", inCohort(5000, 0, nil, 5000, 4000), 8000, NoFit, false, WaitingForQuota},
		{"borrowing limit caps", inCohort(5000, 0, ptr(1000), 5000, 0), 6001, NoFit, false, ExceedsMaxQuota},
		{"borrowing limit boundary", inCohort(5000, 0, ptr(1000), 5000, 0), 6000, Fit, true, ""},
		{"cohort full under nominal: preempt mode", inCohort(5000, 0, nil, 5000, 9000), 2000, Preempt, false, WaitingForQuota},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &status{}
			mode, borrow := fitsQuota(tc.cq, fr, tc.val, st)
			if mode != tc.wantMode || borrow != tc.wantBorrow {
				t.Fatalf("got %v borrow=%v, want %v borrow=%v", mode, borrow, tc.wantMode, tc.wantBorrow)
			}
			token := ""
			if b := st.first(); b != nil {
				token = b.token
			}
			if token != tc.wantToken {
				t.Errorf("reason token %q, want %q (%v)", token, tc.wantToken, st.reasons)
			}
		})
	}
}

// TestEntryOrder pins kueue-semantics §5.3: non-borrowing first, then
// priority, then queue time.
func TestEntryOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(key string, borrow bool, prio int32, ms int) Entry {
		return Entry{Workload: &Workload{Key: key, Priority: prio, QueueTime: t0.Add(time.Duration(ms) * time.Millisecond)},
			Assignment: Assignment{Borrowing: borrow}}
	}
	cases := []struct {
		name string
		a, b Entry
	}{
		{"non-borrowing low priority before borrowing high priority", e("x", false, 0, 5), e("y", true, 100, 0)},
		{"higher priority first among borrowers", e("x", true, 10, 5), e("y", true, 1, 0)},
		{"earlier first among equals", e("x", false, 1, 0), e("y", false, 1, 1)},
	}
	for _, tc := range cases {
		if entryOrder(tc.a, tc.b) >= 0 || entryOrder(tc.b, tc.a) <= 0 {
			t.Errorf("%s: %s should come before %s", tc.name, tc.a.Workload.Key, tc.b.Workload.Key)
		}
	}
}

// TestReasonTokensAreUnique keeps the catalog honest.
func TestReasonTokensAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, tok := range Tokens {
		if seen[tok] || tok == "" {
			t.Errorf("token %q duplicated or empty", tok)
		}
		seen[tok] = true
	}
}
