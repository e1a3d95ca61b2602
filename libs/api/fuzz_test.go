package api

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
)

// FuzzDecode asserts that nothing reachable from untrusted bytes panics:
// Decode, then Validate, PodRequests, RequestsExceedLimits, JobToWorkload and
// DeepCopy on whatever decoded, and that errors keep their contract. It also
// asserts the bounds at the door: never more than MaxDocuments objects, and
// no valid Workload (or Job turned Workload) whose usage would overflow.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		singleClusterQueueSetup,
		sampleJob,
		multiDocYAML,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"namespace":"a","name":"w"},"spec":{"podSets":[{"count":2,"minCount":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`,
		// Every member readWorkload (fastworkload.go) takes.
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w1","namespace":"ns-1","labels":{"a":"b"},"annotations":{"x/y":"z z"}},"spec":{"queueName":"lq","priority":50,"priorityClassName":"p","active":true,"podSets":[{"name":"main","count":3,"minCount":1,"template":{"spec":{"initContainers":[{"name":"i"}],"containers":[{"name":"c","image":"busybox","command":["sh"],"args":["x"],"resources":{"requests":{"cpu":"3","memory":6e9},"limits":{"cpu":4}}}]}}}]}}`,
		`[{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"a"}}]}]`,
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: c}\nspec:\n  cohort: x\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 1, lendingLimit: 2, borrowingLimit: -1}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
		"a: &a [*a, *a]\n",
		"---\n- 1\n---\nnull\n",
		// Hostile inputs from issue 13: NUL, overflowing amounts, huge
		// counts, too many documents.
		workloadJSON(podSetJSON("main", 1, cpuContainer("1"))),
		strings.Replace(workloadJSON(podSetJSON("main", 1, cpuContainer("1"))), `"a":"ok"`, `"a":"o\u0000k"`, 1),
		workloadJSON(`{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","image":"b\u0000x"}]}}}`),
		workloadJSON(podSetJSON("main", 1, cpuContainer("1e30"))),
		workloadJSON(podSetJSON("main", 4, cpuContainer("2305843009213693952m"))),
		workloadJSON(podSetJSON("a", 1, cpuContainer("9223372036854775807m")), podSetJSON("b", 1, cpuContainer("1m"))),
		workloadJSON(podSetJSON("main", 2147483647, cpuContainer("1"))),
		clusterQueueJSON("borrowingLimit", "1e30"),
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"namespace":"n","name":"j","labels":{"kueue.x-k8s.io/queue-name":"q"}},"spec":{"parallelism":2147483647,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1e15"}}}]}}}}`,
		// Too many documents, kept small so the fuzzer stays fast (the
		// limit itself is pinned by TestMaxDocuments).
		"[" + strings.Repeat("{},", MaxDocuments) + "{}]",
		strings.Repeat("kind: X\n---\n", MaxDocuments+1),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		assertFastAgrees(t, data)
		objs, err := Decode(data)
		if len(objs) > MaxDocuments {
			t.Fatalf("decoded %d objects, more than MaxDocuments", len(objs))
		}
		if err != nil {
			if errs, ok := err.(Errors); !ok || len(errs) == 0 {
				t.Fatalf("Decode error %T %v is not a non-empty Errors", err, err)
			}
			_ = errors.Is(err, ErrUnsupportedKind)
		}
		for _, o := range objs {
			if o == nil {
				t.Fatal("nil object")
			}
			verr := Validate(o)
			if verr != nil {
				if errs, ok := verr.(Errors); !ok || len(errs) == 0 {
					t.Fatalf("Validate error %T is not a non-empty Errors", verr)
				}
			}
			// The fast accept (validfast.go) changes no answer.
			if full := validateFull(o); (full == nil) != (verr == nil) || (full != nil && full.Error() != verr.Error()) {
				t.Fatalf("Validate = %v, the full validation %v", verr, full)
			}
			_ = ObjectRef(o)
			_ = o.DeepCopyObject()
			Default(o)
			switch x := o.(type) {
			case *Workload:
				if verr := Validate(x); verr == nil {
					assertUsageFits(t, x)
				}
				for i := range x.Spec.PodSets {
					PodRequests(&x.Spec.PodSets[i].Template.Spec)
					RequestsExceedLimits(&x.Spec.PodSets[i].Template.Spec)
				}
				_ = WorkloadPriority(x)
			case *Job:
				if wl, err := JobToWorkload(x, classes); err == nil {
					werr, full := Validate(wl), validateFull(wl)
					if (werr == nil) != (full == nil) || (full != nil && full.Error() != werr.Error()) {
						t.Fatalf("Validate = %v, the full validation %v", werr, full)
					}
					if werr == nil {
						assertUsageFits(t, wl)
					}
					PodRequests(&wl.Spec.PodSets[0].Template.Spec)
				}
			}
		}
	})
}

// assertFastAgrees fails if the fast path accepts what decodeReference
// refuses, or decodes it to other objects: the fast path may only give up.
func assertFastAgrees(t *testing.T, data []byte) {
	t.Helper()
	fast, err := fastDecode(data, DecodeOptions{})
	if err != nil {
		return
	}
	ref, rerr := decodeReference(data)
	if rerr != nil {
		t.Fatalf("fast path accepted %q; the reference refuses it: %v", data, rerr)
	}
	if diff := cmp.Diff(ref, fast); diff != "" {
		t.Fatalf("fast path decoded %q to other objects (-reference +fast):\n%s", data, diff)
	}
}

// assertUsageFits recomputes, independently of validateTotals, what the
// scheduler will compute for a valid workload, and fails if any step
// overflows int64 or a count exceeds MaxPodSetCount.
func assertUsageFits(t *testing.T, wl *Workload) {
	t.Helper()
	total := map[corev1.ResourceName]*big.Int{}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		if ps.Count < 1 || ps.Count > MaxPodSetCount {
			t.Fatalf("valid workload with podSet count %d", ps.Count)
		}
		for name, q := range podResourceList(&ps.Template.Spec) {
			if name == ResourcePods {
				continue
			}
			v := q.AsDec()
			if name == corev1.ResourceCPU {
				v = new(inf.Dec).Mul(v, inf.NewDec(1000, 0))
			}
			n := new(inf.Dec).Round(v, 0, inf.RoundCeil).UnscaledBig()
			n.Mul(n, big.NewInt(int64(ps.Count)))
			if total[name] == nil {
				total[name] = new(big.Int)
			}
			total[name].Add(total[name], n)
		}
	}
	for name, v := range total {
		if !v.IsInt64() {
			t.Fatalf("valid workload whose total %s request %s overflows int64", name, v)
		}
	}
}
