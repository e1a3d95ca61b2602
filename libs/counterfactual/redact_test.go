package counterfactual

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPriorityNamesItsHolders: a Priority change knows whose priority its
// threshold is, so that Redact can tell a foreign priority from one the
// caller may read.
func TestPriorityNamesItsHolders(t *testing.T) {
	w := newWorld(t, rf+cq("a", "", "LowerPriority", flavor("rf", "4")))
	for _, s := range []string{wl("a", "one", "1", 5), wl("a", "two", "2", 5), wl("a", "w", "3", 0)} {
		w.submit(s)
	}
	pr := ofKind(w.search("a/w").Changes, KindPriority)
	if len(pr) != 1 {
		t.Fatalf("priority changes %+v, want one", summarise(pr))
	}
	if d := cmp.Diff([]Ref{{Namespace: "a", Name: "one"}, {Namespace: "a", Name: "two"}}, pr[0].AboveHeldBy); d != "" {
		t.Errorf("holders of priority 5 (-want,+got):\n%s", d)
	}
}

// TestRedactHidesForeignQueuesAndPriorities: a lendingLimit of a
// ClusterQueue the caller may not read loses its name and values; a
// threshold only other namespaces' workloads hold is left out; several
// hidden workloads are counted; what the caller may read stays.
func TestRedactHidesForeignQueuesAndPriorities(t *testing.T) {
	above, prio := int32(777777), int32(777778)
	mine, minePrio := int32(5), int32(6)
	res := Result{Outcome: Found, Changes: []Change{
		{Kind: KindLendingLimit, ClusterQueue: "secret-cq", Cohort: "c",
			Amounts: []Amount{{Flavor: "rf", Resource: "cpu", Value: 1000, Quantity: "1", From: "0", To: "1"}}},
		{Kind: KindLendingLimit, ClusterQueue: "open-cq", Cohort: "c",
			Amounts: []Amount{{Flavor: "rf", Resource: "cpu", Value: 1000, Quantity: "1", From: "0", To: "1"}}},
		{Kind: KindFinish, ClusterQueue: "mine", Workloads: []Ref{{Namespace: "b", Name: "x"}, {Namespace: "a", Name: "y"}, {Namespace: "b", Name: "z"}}},
		{Kind: KindPriority, ClusterQueue: "mine", Above: &above, Priority: &prio, AboveHeldBy: []Ref{{Namespace: "b", Name: "x"}},
			Displaces: []Ref{{Namespace: "b", Name: "x"}}},
		{Kind: KindPriority, ClusterQueue: "mine", Above: &mine, Priority: &minePrio, AboveHeldBy: []Ref{{Namespace: "a", Name: "y"}, {Namespace: "b", Name: "z"}}},
	}}
	res.Redact("a/w", Visibility{
		Namespace:    func(ns string) bool { return ns == "a" },
		ClusterQueue: func(name string) bool { return name != "secret-cq" },
	})
	got := make([]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		got = append(got, c.Message)
	}
	want := []string{
		"admissible if another ClusterQueue's lendingLimit for cpu on rf were 1 higher",
		"admissible if ClusterQueue open-cq's lendingLimit for cpu on rf were 1 higher (1 instead of 0)",
		"admissible if a/y and 2 workloads of other namespaces finished",
		"admissible if its priority were above that of a workload of another namespace (it would preempt another workload)",
		"admissible if its priority were above 5",
	}
	for i, m := range got {
		for _, secret := range []string{"secret-cq", "777777", "777778", "b/x", "b/z"} {
			if strings.Contains(m, secret) {
				t.Errorf("change %d says %q: it names %s", i, m, secret)
			}
		}
	}
	if c := res.Changes[0]; !c.ClusterQueueHidden || c.ClusterQueue != "" || c.Amounts[0].From != "" || c.Amounts[0].To != "" || c.Amounts[0].Quantity != "1" {
		t.Errorf("a foreign lendingLimit change keeps %+v", c)
	}
	if c := res.Changes[1]; c.ClusterQueueHidden || c.ClusterQueue != "open-cq" || c.Amounts[0].To != "1" {
		t.Errorf("a readable lendingLimit change lost %+v", c)
	}
	if c := res.Changes[3]; c.Above != nil || c.Priority != nil {
		t.Errorf("a threshold only team b holds is kept: above %v", *c.Above)
	}
	if c := res.Changes[4]; c.Above == nil || *c.Above != 5 {
		t.Errorf("a threshold a/y holds is left out")
	}
	for _, c := range res.Changes {
		if c.AboveHeldBy != nil {
			t.Errorf("holders kept after redaction: %v", c.AboveHeldBy)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("messages (-want,+got):\n%s", d)
	}
}
