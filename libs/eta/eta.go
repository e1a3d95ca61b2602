// Package eta estimates when each pending workload will be admitted, by
// running the decision core forward from the present state. It is part of
// the pure core: no I/O, no clock; the caller folds the log (libs/history)
// and passes the time.
//
//	log ──Recorded──▶ run times of finished runs, per LocalQueue and
//	                  priority class
//	state at now ──every admitted run finishes at admittedAt + its
//	               expected run time──▶ engine runs to quiescence after
//	               each finish ──▶ the instant each pending workload is
//	               admitted, and the finishes it waited for
//
// A run's expected run time is, in order: the workload's
// jetqueue.dev/expected-runtime annotation; the median run time of the
// finished runs of the same LocalQueue and priority class; none (the run is
// assumed to hold its quota past the horizon). A run already past its
// expected run time is assumed to finish now. Workloads admitted in the
// simulation report PodsReady at once and finish after their own expected
// run time; no workload arrives, and no priority or configuration changes.
package eta

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// Horizon is how far ahead the simulation runs: a workload not admitted
// by now+Horizon has no ETA.
const Horizon = 31 * 24 * time.Hour

// MaxSteps bounds the finishes one estimate simulates.
const MaxSteps = 200_000

// Class is what makes runs similar: the LocalQueue (namespace/name) and
// the priority class name (empty when none).
type Class struct {
	LocalQueue    string
	PriorityClass string
}

// ClassOf is a workload's class.
func ClassOf(wl *api.Workload) Class {
	return Class{LocalQueue: api.NamespacedName(wl.Namespace, wl.Spec.QueueName), PriorityClass: wl.Spec.PriorityClassName}
}

// MaxSamples bounds the run times kept per class: the median is over the
// most recent ones, so that what an estimate holds and reads does not grow
// with the history.
const MaxSamples = 1000

// Runs are recorded run times (last admission to finish) per class, in
// the order of their finishes, at most MaxSamples each (the most recent).
type Runs map[Class][]time.Duration

// Recorded collects the run times of the runs finished at or before upTo
// (all when zero): from a workload's last admission to its finish, for
// finishes of workloads that held quota.
func Recorded(recs []history.Record, upTo time.Time) Runs {
	l := NewLearner()
	for _, r := range recs {
		if !upTo.IsZero() && r.Event.Time.After(upTo) {
			break
		}
		l.Observe(r.Event)
	}
	return l.Runs()
}

// Learner collects run times one event at a time, in stream order, as
// Recorded does over a whole log: a replica kept up to date feeds it
// each event once. What it holds is bounded by the live workloads (their
// class and admission time, forgotten when they finish or end) and
// MaxSamples per class.
type Learner struct {
	runs     Runs
	class    map[string]Class
	admitted map[string]time.Time
}

// NewLearner returns a learner that has seen no event.
func NewLearner() *Learner {
	return &Learner{runs: Runs{}, class: map[string]Class{}, admitted: map[string]time.Time{}}
}

// Runs are the run times so far; the caller must not modify them, and
// they change with the next Observe.
func (l *Learner) Runs() Runs { return l.runs }

// Observe takes the next event of the log.
func (l *Learner) Observe(ev events.Event) {
	if events.CheckSource(ev) != nil {
		return
	}
	switch x := ev.Data.(type) {
	case *events.WorkloadSubmittedData:
		// Only the class is read: decoding the whole workload again (the
		// fold has) was a third of a replica's catching up with a log.
		var wl struct {
			Spec struct {
				QueueName         string `json:"queueName"`
				PriorityClassName string `json:"priorityClassName"`
			} `json:"spec"`
		}
		if json.Unmarshal(x.Workload, &wl) == nil {
			l.class[replay.Key(x.WorkloadRef)] = Class{LocalQueue: api.NamespacedName(x.Namespace, wl.Spec.QueueName),
				PriorityClass: wl.Spec.PriorityClassName}
		}
	case *events.QuotaReservedData:
		l.admitted[replay.Key(x.WorkloadRef)] = ev.Time
	case *events.EvictedData:
		delete(l.admitted, replay.Key(x.WorkloadRef))
	case *events.WorkloadFinishedData:
		k := replay.Key(x.WorkloadRef)
		if at, ok := l.admitted[k]; ok {
			if c, ok := l.class[k]; ok {
				l.add(c, ev.Time.Sub(at))
			}
			delete(l.admitted, k)
		}
		// A finished workload is never admitted again: only a new
		// submission under its name is, which sets its class anew.
		delete(l.class, k)
	case *events.WorkloadRef:
		switch {
		case events.Ends(ev.Type):
			delete(l.admitted, replay.Key(*x))
			delete(l.class, replay.Key(*x))
		case ev.Type == events.Deactivated:
			delete(l.admitted, replay.Key(*x))
		}
	}
}

// add appends a run time, keeping the most recent MaxSamples: the slice
// is cut back once it holds twice as many, so that each finish costs
// amortized constant time.
func (l *Learner) add(c Class, d time.Duration) {
	s := append(l.runs[c], d)
	if len(s) >= 2*MaxSamples {
		s = append(s[:0:0], s[len(s)-MaxSamples:]...)
	}
	l.runs[c] = s
}

// recent is a class's most recent MaxSamples run times.
func (r Runs) recent(c Class) []time.Duration {
	d := r[c]
	return d[max(0, len(d)-MaxSamples):]
}

// Median is the lower median of a class's most recent MaxSamples run
// times; false when none.
func (r Runs) Median(c Class) (time.Duration, bool) {
	d := r.recent(c)
	if len(d) == 0 {
		return 0, false
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2], true
}

// Basis says where a run time comes from.
type Basis string

const (
	// FromAnnotation is the workload's jetqueue.dev/expected-runtime.
	FromAnnotation Basis = "annotation"
	// FromRecorded is the median of recorded runs of the same class.
	FromRecorded Basis = "recorded"
	// Unknown is neither: the run is assumed to outlast the horizon.
	Unknown Basis = "unknown"
)

// Runtime is one run's expected run time and where it comes from.
type Runtime struct {
	Seconds float64 `json:"seconds,omitempty"`
	Basis   Basis   `json:"basis"`
	// Samples counts the recorded runs the median is over.
	Samples int `json:"samples,omitempty"`
}

func (rt Runtime) duration() time.Duration { return time.Duration(rt.Seconds * float64(time.Second)) }

// Expected is a workload's expected run time.
func Expected(wl *api.Workload, runs Runs) Runtime {
	return expected(wl, func(c Class) Runtime { return classRuntime(runs, c) })
}

func expected(wl *api.Workload, ofClass func(Class) Runtime) Runtime {
	if d, ok, err := api.ExpectedRuntime(wl.Annotations); ok && err == nil {
		return Runtime{Seconds: d.Seconds(), Basis: FromAnnotation}
	}
	return ofClass(ClassOf(wl))
}

// classRuntime is the expected run time of a class's runs.
func classRuntime(runs Runs, c Class) Runtime {
	if d, ok := runs.Median(c); ok {
		return Runtime{Seconds: d.Seconds(), Basis: FromRecorded, Samples: len(runs.recent(c))}
	}
	return Runtime{Basis: Unknown}
}

// Finish is an admitted run the estimate waits for, with when it is
// expected to finish.
type Finish struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Hidden is a finish of a workload the caller may not read: it has
	// neither name, nor time, nor run time (Estimate.Redacted).
	Hidden  bool      `json:"hidden,omitempty"`
	At      time.Time `json:"at,omitzero"`
	Runtime Runtime   `json:"runtime,omitzero"`
	// Overdue is set when the run was already past its expected run time
	// at now, and is assumed to finish now.
	Overdue bool `json:"overdue,omitempty"`
}

// Estimate is one pending workload's ETA.
type Estimate struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// At is when it is expected to be admitted; nil when not within the
	// horizon on the runs whose run time is known.
	At *time.Time `json:"at"`
	// WaitSeconds is At minus now.
	WaitSeconds *float64 `json:"waitSeconds,omitempty"`
	// After are the finishes of the instant it is admitted at (at most
	// MaxAfter), the ones its admission waits on.
	After []Finish `json:"after,omitempty"`
	// AfterCount counts every finish of that instant.
	AfterCount int `json:"afterCount,omitempty"`
	// Runtime is its own expected run time once admitted.
	Runtime Runtime `json:"runtime"`
	// Assumption says in words what the estimate rests on.
	Assumption string `json:"assumption"`
}

// MaxAfter bounds an estimate's After.
const MaxAfter = 8

// Result holds every pending workload's estimate, by namespace/name.
type Result struct {
	Now       time.Time            `json:"now"`
	Estimates map[string]*Estimate `json:"-"`
	// Steps counts the finishes simulated; Truncated is set when
	// MaxSteps stopped the simulation.
	Steps     int  `json:"steps"`
	Truncated bool `json:"truncated,omitempty"`
	// UnknownRuns counts admitted runs (now or in the simulation) whose
	// run time is unknown.
	UnknownRuns int `json:"unknownRuns"`
}

type finishStep struct {
	at  time.Time
	key string
	gen int
	fin Finish
}

type finishes []finishStep

func (h finishes) Len() int { return len(h) }
func (h finishes) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].key < h[j].key
}
func (h finishes) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *finishes) Push(x any)   { *h = append(*h, x.(finishStep)) }
func (h *finishes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type sim struct {
	eng  *engine.Engine
	runs Runs
	// medians are the classes' run times, each computed once: a class's
	// median sorts up to MaxSamples run times.
	medians map[Class]Runtime
	now     time.Time
	queue   finishes
	gen     map[string]int
	res     *Result
	unknown map[string]bool
	// left counts the pending workloads not admitted yet in the
	// simulation: once none is, nothing further can change an estimate.
	left int
	// want are the workloads Until waits for that have no estimate yet.
	want map[string]bool
}

// Estimates runs the engine forward from now until every pending workload
// has its estimate (or the simulation ends). The engine is consumed: the
// caller passes a state folded for this purpose.
func Estimates(eng *engine.Engine, runs Runs, now time.Time) *Result {
	return Start(eng, runs, now).Until(nil)
}

// Sim is a simulation run forward only as far as asked. Until runs it on
// until given workloads have been admitted in it; an estimate, once given,
// never changes as it runs further (it is the first admission), so a page
// of ETAs costs the simulation up to its last workload rather than the
// whole backlog's, and the next page goes on from there. A Sim is not safe
// for concurrent use; its Result grows as it runs.
type Sim struct {
	s      *sim
	timers int
	ended  bool
	// taken counts the steps run (Taken).
	taken int
}

// Start prepares a simulation of the engine from now (the engine is
// consumed) and makes the admissions possible at now.
func Start(eng *engine.Engine, runs Runs, now time.Time) *Sim {
	s := &sim{eng: eng, runs: runs, now: now, gen: map[string]int{}, unknown: map[string]bool{}, medians: map[Class]Runtime{},
		res: &Result{Now: now, Estimates: map[string]*Estimate{}}, want: map[string]bool{}}
	for _, k := range sortedKeys(eng.Workloads()) {
		w := eng.Workload(k)
		switch w.Status {
		case engine.Pending:
			s.left++
			s.res.Estimates[k] = &Estimate{Namespace: w.Object.Namespace, Name: w.Object.Name,
				ClusterQueue: w.Info.ClusterQueue, Runtime: s.expected(w.Object)}
		case engine.Admitted:
			if !w.PodsReady {
				_ = eng.PodsReady(k)
			}
			s.schedule(k, w.AdmittedAt)
		}
	}
	eng.RecordDecisions()
	s.settle(now, nil)
	return &Sim{s: s}
}

// Until runs the simulation until each of keys (namespace/name) that is
// pending has its estimate, or, for nil, until every pending workload has;
// either way it stops where the whole simulation would (the horizon,
// MaxSteps, nothing left to run). Estimates of workloads not reached yet
// are incomplete (no At, no Assumption) until the simulation reaches them
// or ends.
func (x *Sim) Until(keys []string) *Result {
	res, _ := x.Within(keys, Budget{})
	return res
}

// Ended reports whether the simulation has run to its end.
func (x *Sim) Ended() bool { return x.ended }

// step simulates the next instant (a timer, or every finish of an
// instant and one run to quiescence); false when the simulation is over.
func (x *Sim) step() bool {
	s := x.s
	if s.left == 0 || s.res.Steps >= MaxSteps || x.timers >= MaxSteps {
		return false
	}
	horizon := s.now.Add(Horizon)
	next := horizon
	if s.queue.Len() > 0 && s.queue[0].at.Before(horizon) {
		next = s.queue[0].at
	}
	if s.fireTimer(next) {
		x.timers++
		return true
	}
	if s.queue.Len() == 0 || s.queue[0].at.After(horizon) {
		return false
	}
	at := s.queue[0].at
	// Every finish of this instant, then one run to quiescence.
	var done []Finish
	for s.queue.Len() > 0 && s.queue[0].at.Equal(at) {
		st := heap.Pop(&s.queue).(finishStep)
		w := s.eng.Workload(st.key)
		if w == nil || w.Status != engine.Admitted || s.gen[st.key] != st.gen {
			continue // that run was cut short
		}
		_ = s.eng.Finish(st.key, at)
		done = append(done, st.fin)
		s.res.Steps++
	}
	s.settle(at, done)
	return true
}

// end completes the result: why each workload never admitted has no ETA.
func (x *Sim) end() {
	s := x.s
	x.ended = true
	clear(s.want)
	s.res.Truncated = s.res.Steps >= MaxSteps
	s.res.UnknownRuns = len(s.unknown)
	for k, e := range s.res.Estimates {
		if e.At == nil {
			e.Assumption = s.unadmitted(k)
		}
	}
}

// expected is Expected, with each class's median computed once.
func (s *sim) expected(wl *api.Workload) Runtime {
	return expected(wl, func(c Class) Runtime {
		rt, ok := s.medians[c]
		if !ok {
			rt = classRuntime(s.runs, c)
			s.medians[c] = rt
		}
		return rt
	})
}

// schedule queues the finish of the admission at at.
func (s *sim) schedule(k string, at time.Time) {
	s.gen[k]++
	w := s.eng.Workload(k)
	rt := s.expected(w.Object)
	if rt.Basis == Unknown {
		s.unknown[k] = true
		return
	}
	end := at.Add(rt.duration())
	f := Finish{Namespace: w.Object.Namespace, Name: w.Object.Name, At: end, Runtime: rt}
	if end.Before(s.now) {
		end, f.At, f.Overdue = s.now, s.now, true
	}
	heap.Push(&s.queue, finishStep{at: end, key: k, gen: s.gen[k], fin: f})
}

// settle runs the engine to rest at at (as admission does) and notes the admissions.
func (s *sim) settle(at time.Time, done []Finish) {
	s.eng.RunToRest(at)
	for _, d := range s.eng.DrainDecisions() {
		if d.Kind != engine.DecidedAdmission {
			continue
		}
		_ = s.eng.PodsReady(d.Key)
		s.schedule(d.Key, at)
		e := s.res.Estimates[d.Key]
		if e == nil || e.At != nil {
			continue
		}
		s.left--
		delete(s.want, d.Key)
		t := at
		wait := t.Sub(s.now).Seconds()
		e.At, e.WaitSeconds = &t, &wait
		e.ClusterQueue = d.Admission.ClusterQueue
		e.After, e.AfterCount = done[:min(len(done), MaxAfter)], len(done)
		e.Assumption = Assumption(e.After, e.AfterCount, wait)
	}
	s.eng.DrainEvictions()
}

// fireTimer fires the PodsReady timers (requeue backoffs) due by until,
// if any, as the podsready service does.
func (s *sim) fireTimer(until time.Time) bool {
	c := s.eng.Configuration()
	if c == nil || c.WaitForPodsReady == nil || !c.WaitForPodsReady.Enable {
		return false
	}
	t, ok := s.eng.NextTimer()
	if !ok || t.After(until) {
		return false
	}
	if t.Before(s.now) {
		t = s.now
	}
	s.eng.FireTimers(t)
	s.settle(t, nil)
	return true
}

// Assumption renders what an admission at wait seconds from now rests
// on: the finishes of its instant (count of them, the first few given).
func Assumption(done []Finish, count int, wait float64) string {
	if count == 0 {
		if wait == 0 {
			return "admissible now: nothing it waits for"
		}
		return "admitted once its requeue backoff ends"
	}
	// The first three finishes the caller may read are described, the
	// hidden ones counted (they are other namespaces'), the rest counted.
	var parts []string
	shown, hidden := 0, 0
	for _, f := range done {
		switch {
		case f.Hidden:
			hidden++
		case shown < 3:
			parts = append(parts, describe(f))
			shown++
		}
	}
	switch {
	case hidden == 1:
		parts = append(parts, "a workload of another namespace")
	case hidden > 1:
		parts = append(parts, fmt.Sprintf("%d workloads of other namespaces", hidden))
	}
	if more := count - shown - hidden; more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return "assumes " + strings.Join(parts, ", ") + " finishes as expected, and no workload of higher priority arrives"
}

func describe(f Finish) string {
	who := api.NamespacedName(f.Namespace, f.Name)
	d := time.Duration(f.Runtime.Seconds * float64(time.Second))
	switch {
	case f.Overdue:
		return fmt.Sprintf("%s (past its expected run time of %s, assumed to finish now)", who, d)
	case f.Runtime.Basis == FromAnnotation:
		return fmt.Sprintf("%s (run time %s, from its %s annotation)", who, d, api.ExpectedRuntimeAnnot)
	default:
		return fmt.Sprintf("%s (run time %s, the median of %d finished runs of its LocalQueue and priority class)", who, d, f.Runtime.Samples)
	}
}

// unadmitted says why a workload has no ETA.
func (s *sim) unadmitted(k string) string {
	if s.res.Truncated {
		return fmt.Sprintf("no estimate: the simulation stopped after %d finishes", MaxSteps)
	}
	if len(s.unknown) > 0 {
		return fmt.Sprintf("no estimate: %d admitted run(s) have no %s annotation and no finished run of the same LocalQueue and priority class to take the run time from; it is not admitted before the runs with a known run time finish",
			len(s.unknown), api.ExpectedRuntimeAnnot)
	}
	if s.queue.Len() > 0 {
		return "no estimate: not admitted within " + Horizon.String()
	}
	reason := ""
	if w := s.eng.Workload(k); w != nil && w.Reason != nil {
		reason = " (" + w.Reason.Token + ")"
	}
	return "no estimate: not admitted even once every run finishes" + reason
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
