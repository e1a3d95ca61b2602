package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestTrimDecidesAsTheWhole: random worlds, a third of them with queues
// that preempt, with backlogs beyond their quota; a copy trimmed for a pending workload and
// an untrimmed copy take the same change, of each kind Trim allows, and
// run at the same instant: every workload the trimmed copy holds ends
// the same in both, with the same decisions, and every workload trimmed
// stays pending in the whole.
func TestTrimDecidesAsTheWhole(t *testing.T) {
	trimmedSeeds, removed, preemptingTrimmed := 0, 0, 0
	for seed := range uint64(trimWorlds) {
		rng := rand.New(rand.NewPCG(seed, 29))
		world := randomWorld(rng)
		if seed%3 == 0 {
			// Queues that preempt, which Trim leaves whole.
			world = strings.ReplaceAll(world, "  namespaceSelector: {}\n",
				"  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n")
		}
		queues := strings.Count(world, "kind: LocalQueue")
		e := New()
		e.RecordDecisions()
		apply(t, e, world)
		for i := range 40 + rng.IntN(80) {
			submit(t, e, randomWorkload(rng, fmt.Sprintf("w%d", i), queues))
		}
		now := lastCreated.Add(time.Minute)
		e.RunToQuiescence(now)
		e.DrainDecisions()
		e.DrainEvictions()
		// Some finish, and more arrive untried.
		var admitted, pending []string
		for _, k := range sortedKeys(e.Workloads()) {
			switch e.Workload(k).Status {
			case Admitted:
				admitted = append(admitted, k)
			case Pending:
				pending = append(pending, k)
			}
		}
		for _, k := range admitted {
			if rng.IntN(4) == 0 {
				if err := e.Finish(k, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range rng.IntN(20) {
			submit(t, e, randomWorkload(rng, fmt.Sprintf("x%d", i), queues))
		}
		if len(pending) == 0 {
			continue
		}
		keep := pending[rng.IntN(len(pending))]
		change := trimChange(t, rng, e, keep, admitted, now)
		drop := e.Unreachable(keep, now)
		whole, trimmed := e.Clone(), e.CloneWithout(drop)
		n := len(drop)
		if left := len(whole.Workloads()) - len(trimmed.Workloads()); left != n {
			t.Fatalf("seed %d: %d unreachable, the copy has %d fewer workloads", seed, n, left)
		}
		if n > 0 && seed%3 == 0 {
			preemptingTrimmed++
		}
		if n > 0 {
			trimmedSeeds++
			removed += n
		}
		for _, x := range []*Engine{whole, trimmed} {
			change.do(x, now)
			x.RunToQuiescence(now)
		}
		if d, w := decisionsText(trimmed.DrainDecisions()), decisionsText(whole.DrainDecisions()); d != w {
			t.Fatalf("seed %d, %s, %d trimmed: decisions\n%v\nwant (whole)\n%v", seed, change.name, n, d, w)
		}
		for k, w := range whole.Workloads() {
			tw := trimmed.Workload(k)
			if tw == nil {
				if w.Status != Pending {
					t.Fatalf("seed %d, %s: %s was trimmed, and the whole ends it %v", seed, change.name, k, w.Status)
				}
				continue
			}
			if tw.Status != w.Status || fmt.Sprint(tw.Admission) != fmt.Sprint(w.Admission) {
				t.Fatalf("seed %d, %s, %d trimmed: %s ends %v %v, want (whole) %v %v", seed, change.name, n, k, tw.Status, tw.Admission, w.Status, w.Admission)
			}
		}
		if trimmed.Workload(keep) == nil {
			t.Fatalf("seed %d: keep %s was trimmed", seed, keep)
		}
	}
	t.Logf("%d of %d worlds trimmed (%d of them preempting), %d workloads in all", trimmedSeeds, trimWorlds, preemptingTrimmed, removed)
	if trimmedSeeds < 40 || preemptingTrimmed < 20 {
		t.Fatalf("only %d worlds trimmed anything (%d preempting): the test does not reach Trim", trimmedSeeds, preemptingTrimmed)
	}
}

// trimWorlds is how many worlds TestTrimDecidesAsTheWhole draws.
var trimWorlds = 400

// trimChange draws one change of a kind Trim allows.
func trimChange(t *testing.T, rng *rand.Rand, e *Engine, keep string, admitted []string, now time.Time) cloneOp {
	t.Helper()
	switch rng.IntN(5) {
	case 0:
		var fin []string
		for _, k := range admitted {
			if w := e.Workload(k); w != nil && w.Status == Admitted && rng.IntN(2) == 0 {
				fin = append(fin, k)
			}
		}
		return cloneOp{"finish " + strings.Join(fin, ","), func(x *Engine, now time.Time) {
			for _, k := range fin {
				if err := x.Finish(k, now); err != nil {
					t.Fatal(err)
				}
			}
		}}
	case 1:
		p := int32(rng.IntN(5))
		return cloneOp{fmt.Sprintf("priority of %s to %d", keep, p), func(x *Engine, now time.Time) {
			if err := x.SetPriority(keep, p, now); err != nil {
				t.Fatal(err)
			}
		}}
	case 2:
		return cloneOp{"resubmit " + keep, func(x *Engine, now time.Time) {
			if err := x.Resubmit(keep, now, nil); err != nil {
				t.Fatal(err)
			}
		}}
	default:
		names := e.ClusterQueueNames()
		cq := e.ClusterQueue(names[rng.IntN(len(names))]).DeepCopy()
		lending := rng.IntN(2) == 0
		var edited []string
		for gi := range cq.Spec.ResourceGroups {
			for fi := range cq.Spec.ResourceGroups[gi].Flavors {
				for ri := range cq.Spec.ResourceGroups[gi].Flavors[fi].Resources {
					r := &cq.Spec.ResourceGroups[gi].Flavors[fi].Resources[ri]
					q := resource.MustParse(fmt.Sprint(rng.IntN(8)))
					if lending {
						if r.LendingLimit != nil && q.Cmp(r.NominalQuota) <= 0 {
							r.LendingLimit = &q
							edited = append(edited, "lendingLimit "+q.String())
						}
					} else if r.BorrowingLimit != nil {
						r.BorrowingLimit = &q
						edited = append(edited, "borrowingLimit "+q.String())
					}
				}
			}
		}
		slices.Sort(edited)
		return cloneOp{fmt.Sprintf("%s %v", cq.Name, edited), func(x *Engine, now time.Time) {
			if _, err := x.Apply(cq.DeepCopy(), now); err != nil {
				t.Fatal(err)
			}
		}}
	}
}

func decisionsText(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s %s", d.Kind, d.Key)
		if d.Admission != nil {
			fmt.Fprintf(&b, " %+v", *d.Admission)
		}
		if d.Reason != nil {
			fmt.Fprintf(&b, " %+v", *d.Reason)
		}
		for _, tg := range d.Targets {
			fmt.Fprintf(&b, " target %s %s by %s of %s", tg.Workload.Key, tg.Kind, tg.Preemptor, tg.PreemptorCQ)
		}
		fmt.Fprintf(&b, " %s\n", d.EvictionReason)
	}
	return b.String()
}
