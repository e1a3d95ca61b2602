package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
)

// Record is one event of the log at its stream sequence.
type Record struct {
	Seq   uint64
	Event events.Event
	// Stored is when JetStream stored it (zero in tests that build a
	// log by hand): recovery times are read from it.
	Stored time.Time
}

// Key names a workload.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Outcome is what the load generator learnt of one submission.
type Outcome int

const (
	// Accepted: answered 2xx; it must be in the log exactly once.
	Accepted Outcome = iota
	// Refused: answered 4xx; it must not be in the log.
	Refused
	// Unanswered: still without an answer when the load stopped; it may
	// be in the log, at most once.
	Unanswered
)

// Offender is one breach of an invariant: the workload, the sequence
// where it shows and what is wrong.
type Offender struct {
	Workload Key
	Seq      uint64
	What     string
}

func (o Offender) String() string {
	return fmt.Sprintf("%s at seq %d: %s", o.Workload, o.Seq, o.What)
}

// Report is the checker's verdict, one list per invariant.
type Report struct {
	// Submitted counts the WorkloadSubmitted events in the log.
	Submitted int
	// Lost: accepted and never in the log.
	Lost []Offender
	// Duplicated: submitted more than once, in the log though never
	// accepted, or admitted again without an eviction, finish or
	// deletion between.
	Duplicated []Offender
	// OverQuota: an event after which a ClusterQueue or cohort holds more
	// than its quota allows, or an admission that charges nothing for a
	// resource the workload requests.
	OverQuota []Offender
	// Stuck: pending at the end while its ClusterQueue and cohort have room.
	Stuck []Offender
	// ProjectionMismatches: the projection's status differs from the log's.
	ProjectionMismatches []Offender
}

// Bad reports whether any invariant is broken.
func (r Report) Bad() bool {
	return len(r.Lost)+len(r.Duplicated)+len(r.OverQuota)+len(r.Stuck)+len(r.ProjectionMismatches) > 0
}

// Counts renders the bad counts of the summary line.
func (r Report) Counts() string {
	return fmt.Sprintf("lost=%d duplicated=%d over-quota=%d stuck=%d projection-mismatches=%d",
		len(r.Lost), len(r.Duplicated), len(r.OverQuota), len(r.Stuck), len(r.ProjectionMismatches))
}

// Offenders lists the first n offenders of each broken invariant.
func (r Report) Offenders(n int) string {
	var b strings.Builder
	for _, l := range []struct {
		name string
		list []Offender
	}{{"lost", r.Lost}, {"duplicated", r.Duplicated}, {"over-quota", r.OverQuota}, {"stuck", r.Stuck},
		{"projection-mismatches", r.ProjectionMismatches}} {
		for i, o := range l.list {
			if i == n {
				fmt.Fprintf(&b, "  %s: … and %d more\n", l.name, len(l.list)-n)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", l.name, o)
		}
	}
	return b.String()
}

// Workload states derived from the log; the projection's status names
// (libs/store), plus deleted, which the projection does not list.
const (
	statePending  = "pending"
	stateAdmitted = "admitted"
	stateFinished = "finished"
	stateInactive = "inactive"
	stateDeleted  = "deleted"
)

// cell is one quota cell of a ClusterQueue (or, with an empty CQ, of a
// cohort): a resource on a flavor.
type cell struct{ CQ, Flavor, Resource string }

func (c cell) String() string { return c.CQ + " " + c.Flavor + "/" + c.Resource }

// queue is a ClusterQueue's quota as configured in the log.
type queue struct {
	cohort string
	// groups are the resource groups: each a list of flavors, each with
	// its nominal quota and borrowing limit per resource.
	groups [][]flavorQuota
}

type flavorQuota struct {
	name      string
	nominal   map[string]int64
	borrowing map[string]int64 // absent: no limit
}

// workload is what the checker knows of one workload.
type workload struct {
	submits int
	lq      string
	active  bool
	// perPod and count: each podSet's requests per pod and its pod count,
	// from the submission.
	perPod      map[string]map[string]int64
	count       map[string]int64
	state       string
	admittedSeq uint64
	charge      map[cell]int64
}

// need is the workload's total request per resource.
func (w *workload) need() map[string]int64 {
	out := map[string]int64{}
	for ps, req := range w.perPod {
		for r, v := range req {
			out[r] += v * w.count[ps]
		}
	}
	return out
}

// checker walks the log once, keeping its own usage figures.
type checker struct {
	queues   map[string]*queue
	lqs      map[Key]string
	wls      map[Key]*workload
	usage    map[cell]int64
	violated map[string]bool
	report   Report
}

// Check recomputes the invariants from the log alone: the events'
// payloads, never the services' usage figures. sent is what the load
// generator submitted; projection is each workload's status as the
// query API lists it (nil: it could not be read, and is not compared).
func Check(log []Record, sent map[Key]Outcome, projection map[Key]string) Report {
	c := &checker{queues: map[string]*queue{}, lqs: map[Key]string{}, wls: map[Key]*workload{},
		usage: map[cell]int64{}, violated: map[string]bool{}}
	for _, r := range log {
		c.apply(r)
		c.checkQuota(r)
	}
	c.checkSent(sent)
	c.checkPending(lastSeq(log))
	if projection != nil {
		c.checkProjection(projection, lastSeq(log))
	}
	return c.report
}

func lastSeq(log []Record) uint64 {
	if len(log) == 0 {
		return 0
	}
	return log[len(log)-1].Seq
}

func (c *checker) apply(r Record) {
	switch d := r.Event.Data.(type) {
	case *events.ConfigAppliedData:
		c.config(d)
	case *events.WorkloadSubmittedData:
		c.submitted(r.Seq, d)
	case *events.QuotaReservedData:
		c.reserved(r.Seq, d)
	case *events.EvictedData:
		if w := c.wls[Key(d.WorkloadRef)]; w != nil && w.state == stateAdmitted {
			c.release(w, statePending)
		}
	case *events.WorkloadFinishedData:
		c.end(d.WorkloadRef, stateFinished)
	}
	switch r.Event.Type {
	case events.WorkloadDeleted:
		c.end(*r.Event.Data.(*events.WorkloadRef), stateDeleted)
	case events.Deactivated:
		c.end(*r.Event.Data.(*events.WorkloadRef), stateInactive)
	}
}

// config records ClusterQueue quotas and LocalQueue targets. Objects
// that do not decode are left out: ingest validated them, and a checker
// that guessed would prove nothing.
func (c *checker) config(d *events.ConfigAppliedData) {
	switch d.Kind {
	case api.KindClusterQueue:
		var cq api.ClusterQueue
		if json.Unmarshal(d.Object, &cq) == nil {
			c.queues[d.Name] = queueOf(&cq)
		}
	case api.KindLocalQueue:
		var lq api.LocalQueue
		if json.Unmarshal(d.Object, &lq) == nil {
			c.lqs[Key{d.Namespace, d.Name}] = lq.Spec.ClusterQueue
		}
	}
}

func queueOf(cq *api.ClusterQueue) *queue {
	q := &queue{cohort: cq.Spec.Cohort}
	for _, g := range cq.Spec.ResourceGroups {
		var group []flavorQuota
		for _, f := range g.Flavors {
			fq := flavorQuota{name: f.Name, nominal: map[string]int64{}, borrowing: map[string]int64{}}
			for _, r := range f.Resources {
				fq.nominal[string(r.Name)] = amount(r.Name, r.NominalQuota)
				if r.BorrowingLimit != nil {
					fq.borrowing[string(r.Name)] = amount(r.Name, *r.BorrowingLimit)
				}
			}
			group = append(group, fq)
		}
		q.groups = append(q.groups, group)
	}
	return q
}

// amount is a quantity as jetqueue counts it: cpu in milli-units,
// everything else in whole units rounded up.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func (c *checker) submitted(seq uint64, d *events.WorkloadSubmittedData) {
	k := Key(d.WorkloadRef)
	c.report.Submitted++
	if w := c.wls[k]; w != nil {
		w.submits++
		c.report.Duplicated = append(c.report.Duplicated, Offender{k, seq, fmt.Sprintf("submitted again (%d times)", w.submits)})
		return
	}
	w := &workload{submits: 1, active: true, state: statePending, perPod: map[string]map[string]int64{}, count: map[string]int64{}}
	var wl api.Workload
	if err := json.Unmarshal(d.Workload, &wl); err != nil {
		c.report.OverQuota = append(c.report.OverQuota, Offender{k, seq, "submission does not decode, so its usage is unknown: " + err.Error()})
	}
	w.lq = wl.Spec.QueueName
	if wl.Spec.Active != nil && !*wl.Spec.Active {
		w.active, w.state = false, stateInactive
	}
	for _, ps := range wl.Spec.PodSets {
		w.perPod[ps.Name] = podRequests(&ps.Template.Spec)
		w.count[ps.Name] = int64(ps.Count)
	}
	c.wls[k] = w
}

// podRequests is what one pod asks for, as Kueue counts it: the sum of
// its containers, or the largest init container where that is more.
func podRequests(spec *corev1.PodSpec) map[string]int64 {
	out := map[string]int64{}
	for _, ct := range spec.Containers {
		for r, q := range ct.Resources.Requests {
			out[string(r)] += amount(r, q)
		}
	}
	for _, ct := range spec.InitContainers {
		for r, q := range ct.Resources.Requests {
			out[string(r)] = max(out[string(r)], amount(r, q))
		}
	}
	return out
}

// reserved charges an admission: the submission's requests times its
// counts, on the flavors the admission assigns.
func (c *checker) reserved(seq uint64, d *events.QuotaReservedData) {
	k := Key(d.WorkloadRef)
	w := c.wls[k]
	switch {
	case w == nil:
		c.report.Duplicated = append(c.report.Duplicated, Offender{k, seq, "admitted without a submission"})
		return
	case w.state == stateAdmitted:
		c.report.Duplicated = append(c.report.Duplicated, Offender{k, seq,
			fmt.Sprintf("admitted again without an eviction since its admission at seq %d", w.admittedSeq)})
		c.release(w, statePending)
	case w.state != statePending:
		c.report.Duplicated = append(c.report.Duplicated, Offender{k, seq, "admitted while " + w.state})
	}
	w.state, w.admittedSeq, w.charge = stateAdmitted, seq, map[cell]int64{}
	assigned := map[string]bool{}
	for _, ps := range d.Admission.PodSets {
		assigned[ps.Name] = true
		req, ok := w.perPod[ps.Name]
		if !ok {
			c.report.OverQuota = append(c.report.OverQuota, Offender{k, seq, "admission names podSet " + ps.Name + ", which the workload does not have"})
			continue
		}
		for r, v := range req {
			f, ok := ps.Flavors[corev1.ResourceName(r)]
			if !ok {
				if v > 0 {
					c.report.OverQuota = append(c.report.OverQuota, Offender{k, seq, fmt.Sprintf("podSet %s requests %s but the admission charges no flavor for it", ps.Name, r)})
				}
				continue
			}
			w.charge[cell{d.Admission.ClusterQueue, f, r}] += v * w.count[ps.Name]
		}
	}
	for ps := range w.perPod {
		if !assigned[ps] {
			c.report.OverQuota = append(c.report.OverQuota, Offender{k, seq, "admission leaves podSet " + ps + " out, so it is never charged"})
		}
	}
	for cl, v := range w.charge {
		c.usage[cl] += v
	}
}

// end moves a workload to a final state, releasing what it holds.
func (c *checker) end(ref events.WorkloadRef, state string) {
	if w := c.wls[Key(ref)]; w != nil {
		c.release(w, state)
	}
}

func (c *checker) release(w *workload, state string) {
	for cl, v := range w.charge {
		c.usage[cl] -= v
	}
	w.charge, w.state = nil, state
}

// checkQuota checks every bound after an event, recording each bound the
// event leaves exceeded that was not exceeded before it.
func (c *checker) checkQuota(r Record) {
	now := c.exceeded()
	for _, what := range slices.Sorted(maps.Keys(now)) {
		if !c.violated[what] {
			c.report.OverQuota = append(c.report.OverQuota, Offender{refOf(r.Event), r.Seq, fmt.Sprintf("%s after %s", what, shortType(r.Event.Type))})
		}
	}
	c.violated = now
}

// exceeded names every ClusterQueue and cohort bound the usage exceeds:
// per ClusterQueue, nominal quota plus borrowing limit (nominal alone
// outside a cohort; no bound of its own without a borrowing limit); per
// cohort, the sum of its members' nominal quotas.
func (c *checker) exceeded() map[string]bool {
	out := map[string]bool{}
	cohortUse, cohortCap := map[cell]int64{}, map[cell]int64{}
	for name, q := range c.queues {
		for _, g := range q.groups {
			for _, f := range g {
				for r, nominal := range f.nominal {
					cl := cell{name, f.name, r}
					use := c.usage[cl]
					if limit, ok := q.limit(f, r); ok && use > limit {
						out[fmt.Sprintf("ClusterQueue %s uses %d of %d", cl, use, limit)] = true
					}
					if q.cohort != "" {
						co := cell{"cohort " + q.cohort, f.name, r}
						cohortUse[co] += use
						cohortCap[co] += nominal
					}
				}
			}
		}
	}
	for co, use := range cohortUse {
		if use > cohortCap[co] {
			out[fmt.Sprintf("%s uses %d of %d", co, use, cohortCap[co])] = true
		}
	}
	// Usage on a cell no ClusterQueue configures exceeds a quota of 0.
	for cl, use := range c.usage {
		if q := c.queues[cl.CQ]; use > 0 && (q == nil || !q.has(cl.Flavor, cl.Resource)) {
			out[fmt.Sprintf("ClusterQueue %s uses %d of none", cl, use)] = true
		}
	}
	return out
}

// limit is the most one ClusterQueue may use of a cell by itself.
func (q *queue) limit(f flavorQuota, r string) (int64, bool) {
	if q.cohort == "" {
		return f.nominal[r], true
	}
	b, ok := f.borrowing[r]
	return f.nominal[r] + b, ok
}

func (q *queue) has(flavor, r string) bool {
	for _, g := range q.groups {
		for _, f := range g {
			if _, ok := f.nominal[r]; ok && f.name == flavor {
				return true
			}
		}
	}
	return false
}

// fits reports whether need would fit on some flavor of every resource
// group covering it, given the usage now: within the ClusterQueue's
// bound and the cohort's free capacity. All podSets are placed on the same
// flavor (the suite's workloads have one podSet). A resource no group
// covers never fits.
func (c *checker) fits(cqName string, need map[string]int64) bool {
	q := c.queues[cqName]
	if q == nil {
		return false
	}
	covered := map[string]bool{}
	for _, g := range q.groups {
		if len(g) == 0 {
			continue
		}
		want := map[string]int64{}
		for r, v := range need {
			if _, ok := g[0].nominal[r]; ok && v > 0 {
				want[r], covered[r] = v, true
			}
		}
		if len(want) > 0 && !slices.ContainsFunc(g, func(f flavorQuota) bool { return c.fitsFlavor(cqName, q, f, want) }) {
			return false
		}
	}
	for r, v := range need {
		if v > 0 && !covered[r] {
			return false
		}
	}
	return true
}

func (c *checker) fitsFlavor(cqName string, q *queue, f flavorQuota, want map[string]int64) bool {
	for r, v := range want {
		use := c.usage[cell{cqName, f.name, r}]
		if limit, ok := q.limit(f, r); ok && use+v > limit {
			return false
		}
		if q.cohort == "" {
			continue
		}
		var cohortUse, cohortCap int64
		for name, other := range c.queues {
			if other.cohort != q.cohort {
				continue
			}
			for _, g := range other.groups {
				for _, of := range g {
					if of.name == f.name {
						cohortUse += c.usage[cell{name, f.name, r}]
						cohortCap += of.nominal[r]
					}
				}
			}
		}
		if cohortUse+v > cohortCap {
			return false
		}
	}
	return true
}

// checkSent compares the log's submissions with the load generator's.
func (c *checker) checkSent(sent map[Key]Outcome) {
	for _, k := range slices.SortedFunc(maps.Keys(sent), compareKeys) {
		if sent[k] == Accepted && c.wls[k] == nil {
			c.report.Lost = append(c.report.Lost, Offender{k, 0, "accepted (2xx) but never in the log"})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.wls), compareKeys) {
		if o, ok := sent[k]; !ok || o == Refused {
			c.report.Duplicated = append(c.report.Duplicated, Offender{k, 0, "in the log but never accepted"})
		}
	}
}

// checkPending finds every pending workload that would fit.
func (c *checker) checkPending(last uint64) {
	for _, k := range slices.SortedFunc(maps.Keys(c.wls), compareKeys) {
		w := c.wls[k]
		if w.state != statePending || !w.active {
			continue
		}
		cq := c.lqs[Key{k.Namespace, w.lq}]
		if c.fits(cq, w.need()) {
			c.report.Stuck = append(c.report.Stuck, Offender{k, last, fmt.Sprintf("pending although %v fits in ClusterQueue %s and its cohort", w.need(), cq)})
		}
	}
}

// checkProjection compares each workload's status with the projection's.
func (c *checker) checkProjection(projection map[Key]string, last uint64) {
	keys := slices.Collect(maps.Keys(c.wls))
	for k := range projection {
		if c.wls[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		want := stateDeleted
		if w := c.wls[k]; w != nil {
			want = w.state
		}
		got, ok := projection[k]
		if !ok {
			got = stateDeleted
		}
		if got != want {
			c.report.ProjectionMismatches = append(c.report.ProjectionMismatches,
				Offender{k, last, fmt.Sprintf("projection says %s (absent = deleted), the log %s", got, want)})
		}
	}
}

func compareKeys(a, b Key) int {
	return strings.Compare(a.String(), b.String())
}

// refOf names the workload an event is about, if any.
func refOf(ev events.Event) Key {
	var ref struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	}
	if b, err := ev.Body(); err == nil {
		_ = json.Unmarshal(b, &ref)
	}
	return Key(ref)
}

func shortType(t events.Type) string {
	s := strings.TrimPrefix(string(t), "io.jetqueue.")
	return strings.TrimSuffix(s, ".v1")
}
