package chaos

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// doctored builds hand-made logs for the checker: the quota of
// small-setup (below), then whatever events a test appends.
type doctored struct {
	t   *testing.T
	log []Record
}

// smallSetup is one cohort of two ClusterQueues with 4 cpu each (cq-a may
// borrow 2 more, cq-b without limit) and a lone ClusterQueue of 2 cpu,
// each fed by a LocalQueue of the same name in namespace ns.
func smallSetup(t *testing.T) *doctored {
	d := &doctored{t: t}
	d.config(api.KindResourceFlavor, "", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	for _, cq := range []struct{ name, cohort, borrowing, nominal string }{{"cq-a", "co", `,"borrowingLimit":"2"`, "4"}, {"cq-b", "co", "", "4"}, {"cq-c", "", "", "2"}} {
		d.config(api.KindClusterQueue, "", cq.name, fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":%q},
			"spec":{"cohort":%q,"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":%q%s}]}]}]}}`,
			cq.name, cq.cohort, cq.nominal, cq.borrowing))
		d.config(api.KindLocalQueue, "ns", cq.name, fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":%q,"namespace":"ns"},"spec":{"clusterQueue":%q}}`,
			cq.name, cq.name))
	}
	return d
}

func (d *doctored) add(typ events.Type, data any) {
	d.t.Helper()
	// Through the wire format, as the suite reads the stream.
	ev := events.Event{ID: fmt.Sprint(len(d.log) + 1), Type: typ, Source: "test", Time: time.Unix(0, 0), Data: data}
	body, err := ev.Body()
	if err != nil {
		d.t.Fatal(err)
	}
	h := ev.Headers()
	parsed, err := events.Parse(func(k string) string { return h[k] }, body)
	if err != nil {
		d.t.Fatal(err)
	}
	d.log = append(d.log, Record{Seq: uint64(len(d.log) + 1), Event: parsed})
}

func (d *doctored) config(kind, ns, name, object string) {
	d.add(events.ConfigApplied, &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: kind, Namespace: ns, Name: name}, Object: json.RawMessage(object)})
}

// submit adds a one-podSet workload of count pods of cpu each on queue lq.
func (d *doctored) submit(name, lq string, count int, cpu string) {
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns"},
		"spec":{"queueName":%q,"podSets":[{"name":"main","count":%d,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q}}}]}}}]}}`,
		name, lq, count, cpu)
	d.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref(name), Workload: json.RawMessage(wl)})
}

// admit adds a QuotaReserved of podSet main on flavor rf in cq.
func (d *doctored) admit(name, cq string) {
	d.admitWith(name, cq, map[corev1.ResourceName]string{corev1.ResourceCPU: "rf"})
}

func (d *doctored) admitWith(name, cq string, flavors map[corev1.ResourceName]string) {
	d.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref(name), Admission: scheduler.Admission{ClusterQueue: cq,
		// The usage the service claims is deliberately zero: the checker
		// must not read it.
		PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1, Flavors: flavors, Usage: map[corev1.ResourceName]int64{}}}}})
}

func (d *doctored) finish(name string) {
	d.add(events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref(name), Succeeded: true})
}

func (d *doctored) evict(name string) {
	d.add(events.Evicted, &events.EvictedData{WorkloadRef: ref(name), Reason: "Preempted"})
}

func ref(name string) events.WorkloadRef { return events.WorkloadRef{Namespace: "ns", Name: name} }

func key(name string) Key { return Key{"ns", name} }

// check runs the checker with every submitted name accepted and a
// projection equal to the log, unless a test doctors those too.
func (d *doctored) check(sent map[Key]Outcome, projection map[Key]string) Report {
	if sent == nil {
		sent = map[Key]Outcome{}
		for _, r := range d.log {
			if s, ok := r.Event.Data.(*events.WorkloadSubmittedData); ok {
				sent[Key(s.WorkloadRef)] = Accepted
			}
		}
	}
	if projection == nil {
		projection = derivedProjection(d.log)
	}
	return Check(d.log, sent, projection)
}

// derivedProjection is the projection the log implies: the statuses the
// checker itself derives (what checkProjection compares with).
func derivedProjection(log []Record) map[Key]string {
	c := &checker{queues: map[string]*queue{}, lqs: map[Key]string{}, wls: map[Key]*workload{},
		usage: map[cell]int64{}, violated: map[string]bool{}}
	for _, r := range log {
		c.apply(r)
	}
	out := map[Key]string{}
	for k, w := range c.wls {
		if w.state != stateDeleted {
			out[k] = w.state
		}
	}
	return out
}

type counts struct{ Submitted, Lost, Duplicated, OverQuota, Stuck, Projection int }

func countsOf(r Report) counts {
	return counts{r.Submitted, len(r.Lost), len(r.Duplicated), len(r.OverQuota), len(r.Stuck), len(r.ProjectionMismatches)}
}

func wantCounts(t *testing.T, r Report, want counts) {
	t.Helper()
	if diff := cmp.Diff(want, countsOf(r)); diff != "" {
		t.Errorf("counts (-want,+got):\n%s\noffenders:\n%s", diff, r.Offenders(10))
	}
}

// TestCheckCleanLog is the baseline the doctored logs break: admissions
// up to every bound, evictions and finishes between re-admissions, and a
// pending workload that genuinely does not fit.
func TestCheckCleanLog(t *testing.T) {
	d := smallSetup(t)
	d.submit("a1", "cq-a", 3, "2") // 6 cpu: cq-a's nominal 4 + borrowing 2
	d.submit("b1", "cq-b", 1, "2")
	d.submit("c1", "cq-c", 1, "2")
	d.submit("b2", "cq-b", 1, "1") // does not fit: the cohort has 8, 6+2 used
	d.admit("a1", "cq-a")
	d.admit("b1", "cq-b")
	d.admit("c1", "cq-c")
	d.evict("b1")
	d.admit("b1", "cq-b")
	d.finish("c1")
	r := d.check(nil, nil)
	wantCounts(t, r, counts{Submitted: 4})
}

func TestCheckCatchesOverQuota(t *testing.T) {
	t.Run("cohort", func(t *testing.T) {
		d := smallSetup(t)
		d.submit("a1", "cq-a", 3, "2")
		d.submit("b1", "cq-b", 3, "1")
		d.admit("a1", "cq-a")
		d.admit("b1", "cq-b") // 6 + 3 > 8
		r := d.check(nil, nil)
		wantCounts(t, r, counts{Submitted: 2, OverQuota: 1})
		if len(r.OverQuota) == 1 && (r.OverQuota[0].Seq != 11 || r.OverQuota[0].Workload != key("b1")) {
			t.Errorf("offender %v, want ns/b1 at seq 11", r.OverQuota[0])
		}
	})
	t.Run("borrowing limit", func(t *testing.T) {
		d := smallSetup(t)
		d.submit("a1", "cq-a", 7, "1") // 7 > 4 + 2, although the cohort has 8
		d.admit("a1", "cq-a")
		wantCounts(t, d.check(nil, nil), counts{Submitted: 1, OverQuota: 1})
	})
	t.Run("lone queue", func(t *testing.T) {
		d := smallSetup(t)
		d.submit("c1", "cq-c", 1, "2")
		d.submit("c2", "cq-c", 1, "500m")
		d.admit("c1", "cq-c")
		d.admit("c2", "cq-c")
		d.finish("c1")
		// Over from c2's admission until c1's finish: one breach.
		wantCounts(t, d.check(nil, nil), counts{Submitted: 2, OverQuota: 1})
	})
	t.Run("a resource charged to no flavor", func(t *testing.T) {
		d := smallSetup(t)
		d.submit("c1", "cq-c", 1, "1")
		d.admitWith("c1", "cq-c", map[corev1.ResourceName]string{})
		wantCounts(t, d.check(nil, nil), counts{Submitted: 1, OverQuota: 1})
	})
	t.Run("a flavor the queue does not have", func(t *testing.T) {
		d := smallSetup(t)
		d.submit("c1", "cq-c", 1, "1")
		d.admitWith("c1", "cq-c", map[corev1.ResourceName]string{corev1.ResourceCPU: "other"})
		wantCounts(t, d.check(nil, nil), counts{Submitted: 1, OverQuota: 1})
	})
}

func TestCheckCatchesDuplicateAdmission(t *testing.T) {
	d := smallSetup(t)
	d.submit("c1", "cq-c", 1, "1")
	d.admit("c1", "cq-c")
	d.admit("c1", "cq-c") // no eviction between
	r := d.check(nil, nil)
	wantCounts(t, r, counts{Submitted: 1, Duplicated: 1})
	if len(r.Duplicated) == 1 && r.Duplicated[0].Seq != 10 {
		t.Errorf("offender %v, want seq 10", r.Duplicated[0])
	}

	d = smallSetup(t)
	d.submit("c1", "cq-c", 1, "1")
	d.admit("c1", "cq-c")
	d.finish("c1")
	d.admit("c1", "cq-c") // after its finish
	wantCounts(t, d.check(nil, nil), counts{Submitted: 1, Duplicated: 1})
}

func TestCheckCatchesLostAndDuplicatedSubmissions(t *testing.T) {
	d := smallSetup(t)
	d.submit("c1", "cq-c", 1, "1")
	d.submit("c2", "cq-c", 5, "1") // never fits in 2 cpu: genuinely blocked
	d.submit("c2", "cq-c", 5, "1")
	d.submit("stranger", "cq-c", 5, "1")
	d.submit("refused", "cq-c", 5, "1")
	d.submit("maybe", "cq-c", 5, "1")
	sent := map[Key]Outcome{key("c1"): Accepted, key("c2"): Accepted, key("lost"): Accepted,
		key("refused"): Refused, key("maybe"): Unanswered, key("never"): Unanswered}
	r := d.check(sent, nil)
	// lost: ns/lost; duplicated: c2 twice, stranger and refused in the log.
	wantCounts(t, r, counts{Submitted: 6, Lost: 1, Duplicated: 3, Stuck: 1})
	if len(r.Lost) == 1 && r.Lost[0].Workload != key("lost") {
		t.Errorf("lost %v, want ns/lost", r.Lost[0])
	}
}

func TestCheckCatchesStuckPending(t *testing.T) {
	d := smallSetup(t)
	d.submit("a1", "cq-a", 1, "4")
	d.submit("a2", "cq-a", 1, "2")    // fits: cq-a may borrow 2 of cq-b's idle 4
	d.submit("a3", "cq-a", 1, "3")    // does not: 4+3 > 4+2
	d.submit("b1", "cq-b", 1, "5")    // does not: the cohort has 8, 4 used
	d.submit("c1", "cq-c", 1, "1")    // fits
	d.submit("x1", "nowhere", 1, "1") // no such queue: blocked
	d.admit("a1", "cq-a")
	r := d.check(nil, nil)
	wantCounts(t, r, counts{Submitted: 6, Stuck: 2})
	var stuck []Key
	for _, o := range r.Stuck {
		stuck = append(stuck, o.Workload)
	}
	if diff := cmp.Diff([]Key{key("a2"), key("c1")}, stuck); diff != "" {
		t.Errorf("stuck (-want,+got):\n%s", diff)
	}
}

func TestCheckCatchesProjectionMismatch(t *testing.T) {
	d := smallSetup(t)
	d.submit("c1", "cq-c", 1, "1")
	d.submit("c2", "cq-c", 1, "1")
	d.submit("c3", "cq-c", 5, "1")
	d.admit("c1", "cq-c")
	d.admit("c2", "cq-c")
	d.finish("c2")
	// c1 admitted but shown pending, c2 missing, c3 right, a stranger.
	projection := map[Key]string{key("c1"): "pending", key("c3"): "pending", key("ghost"): "admitted"}
	r := d.check(nil, projection)
	wantCounts(t, r, counts{Submitted: 3, Projection: 3})
}
