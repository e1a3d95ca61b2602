package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Checkpoint is the observed state printed for each expect and at the end.
type Checkpoint struct {
	Step     int                                     `json:"step"`
	Admitted map[string]map[string]map[string]string `json:"admitted"`
	Pending  []string                                `json:"pending"`
	Evicted  map[string]string                       `json:"evicted"`
	Inactive []string                                `json:"inactive"`
	Finished []string                                `json:"finished"`

	// PodCounts is checked by expect.podCounts but not printed.
	PodCounts map[string]map[string]int32 `json:"-"`
}

// Result is the outcome of one scenario run.
type Result struct {
	Checkpoints []Checkpoint
	// Mismatches are readable diffs, one per failed check.
	Mismatches []string
	// Warnings are steps that were ignored, such as podsReady for a
	// workload that holds no quota.
	Warnings []string
	// Evictions counts how often each workload lost its quota in the run.
	Evictions map[string]int
}

// sim is one run's state.
type sim struct {
	eng *engine.Engine
	// peers are the other shards' engines when the run is sharded
	// (RunSharded): every event goes to each, and their decisions reach
	// the others as facts (see settle).
	peers       []*engine.Engine
	now         time.Time
	lastCreated time.Time
	// rest makes every run go on to rest (see RunAtRest).
	rest     bool
	evicted  map[string]string
	warnings []string
	shapes   shapes
}

// engines are the run's replicas, shard 0's first.
func (s *sim) engines() []*engine.Engine { return append([]*engine.Engine{s.eng}, s.peers...) }

// each applies one change to every replica and returns shard 0's error
// (replicas of one log agree).
func (s *sim) each(f func(*engine.Engine) error) error {
	err := f(s.eng)
	for _, e := range s.peers {
		_ = f(e)
	}
	return err
}

// copyFor is o for shard 0 and a copy of it for the others: an engine
// keeps the objects it is given.
func (s *sim) copyFor(e *engine.Engine, o api.Object) api.Object {
	if e == s.eng {
		return o
	}
	return o.DeepCopyObject()
}

// settle runs scheduling to quiescence (again, as engine.Settle does, if
// again) and records the evictions. Sharded, each shard runs in turn and
// its decisions are applied to the other replicas as facts (as the
// services read them from the log, and the preemptor's evictions), until
// a round decides nothing but reasons.
func (s *sim) settle(again bool) {
	if len(s.peers) == 0 {
		if s.rest {
			s.eng.RunToRest(s.now)
		} else if again {
			s.eng.Settle(s.now)
		} else {
			s.eng.RunToQuiescence(s.now)
		}
		s.drainEvictions(s.eng)
		return
	}
	for round := 0; ; round++ {
		quiet := true
		for _, e := range s.engines() {
			if s.rest {
				e.RunToRest(s.now)
			} else if again && round == 0 {
				e.Settle(s.now)
			} else {
				e.RunToQuiescence(s.now)
			}
			s.drainEvictions(e)
			for _, d := range e.DrainDecisions() {
				if d.Kind != engine.DecidedInadmissible {
					quiet = false
				}
				for _, peer := range s.engines() {
					if peer != e {
						applyFact(peer, d, s.now)
						peer.DrainEvictions()
					}
				}
			}
		}
		if quiet || round >= engine.MaxCycles {
			return
		}
	}
}

func (s *sim) drainEvictions(e *engine.Engine) {
	for _, ev := range e.DrainEvictions() {
		s.evicted[ev.Key] = ev.Reason
	}
}

// applyFact applies another shard's decision to a replica, as the
// admission service applies it read back from the log (and, for a
// preemption, the evictions the preemptor publishes).
func applyFact(e *engine.Engine, d engine.Decision, now time.Time) {
	switch d.Kind {
	case engine.DecidedAdmission:
		e.ApplyAdmission(d.Key, *d.Admission, now)
	case engine.DecidedInadmissible:
		e.NoteReason(d.Key, *d.Reason)
	case engine.DecidedEviction:
		if d.EvictionReason == engine.EvictedByDeactivation {
			// As libs/replay applies it (an inactive workload admitted
			// while still queued).
			e.ApplyDeactivation(d.Key, now)
			break
		}
		e.ApplyEviction(d.Key, engine.Eviction{Reason: d.EvictionReason}, now)
	case engine.DecidedPreemption:
		for _, v := range d.Targets {
			e.ApplyEviction(v.Workload.Key, engine.Eviction{Reason: engine.EvictedByPreemption, Kind: v.Kind,
				Preemptor: v.Preemptor, PreemptorCQ: v.PreemptorCQ}, now)
		}
	}
}

// advance moves the clock to target, firing every timer due on the way at
// its own instant, each followed by scheduling to quiescence. As the
// oracle does, it settles before the clock moves and again at the target.
func (s *sim) advance(target time.Time) {
	s.settle(true)
	for {
		t, ok := s.eng.NextTimer()
		if !ok || t.After(target) {
			break
		}
		if t.After(s.now) {
			s.now = t
		}
		for _, e := range s.engines() {
			e.FireTimers(s.now)
		}
		s.settle(true)
	}
	s.now = target
	s.settle(true)
}

// Run executes a parsed scenario. An error means the scenario could not be
// run (malformed or unsupported); mismatches are in the result.
func Run(sc *Scenario) (*Result, error) { return RunSharded(sc, 1) }

// RunSharded executes a scenario as n admission shards in lockstep would
// decide it (engine.Shard): each shard's engine is a full replica that
// decides only its own cohort trees, and every decision reaches the other
// replicas as a fact before they run again. Checkpoints are read from
// shard 0's replica. With n = 1 it is Run.
func RunSharded(sc *Scenario, n int) (*Result, error) { return run(sc, n, false) }

// RunAtRest executes a scenario as the admission service decides it: each
// run goes on to rest (engine.RunToRest), where FORMAT.md's rule ends it
// at a repeated state and Run settles again only at the next step. Its
// checkpoints are what the running system shows, and differ from Run's
// only where an expect catches a workload that rule left behind though
// its quota is free (the end-to-end suite checks the services against
// RunAtRest, and names such scenarios).
func RunAtRest(sc *Scenario) (*Result, error) { return run(sc, 1, true) }

// LeftBehind returns the run to rest of a scenario whose expects it does
// not meet (FORMAT.md's rule left a workload there that a running system
// goes on to decide), and nil for every other scenario.
func LeftBehind(sc *Scenario) (*Result, error) {
	res, err := RunAtRest(sc)
	if err != nil || len(res.Mismatches) == 0 {
		return nil, err
	}
	return res, nil
}

func run(sc *Scenario, n int, rest bool) (*Result, error) {
	s := &sim{eng: engine.New(), now: Start, evicted: map[string]string{}, rest: rest}
	if n > 1 {
		for i := 1; i < n; i++ {
			s.peers = append(s.peers, engine.New())
		}
		for i, e := range s.engines() {
			e.RecordDecisions()
			e.SetShard(engine.Shard{Index: i, Count: n}, nil)
		}
	}
	if sc.Configuration != nil {
		if err := s.each(func(e *engine.Engine) error { _, err := e.Apply(s.copyFor(e, sc.Configuration), s.now); return err }); err != nil {
			return nil, fieldError("configuration", "%v", err)
		}
	}
	for i, o := range sc.Objects {
		if err := s.each(func(e *engine.Engine) error { _, err := e.Apply(s.copyFor(e, o), s.now); return err }); err != nil {
			return nil, fieldError(fmt.Sprintf("objects[%d]", i), "%v", err)
		}
	}
	s.settle(false)
	res := &Result{}
	for i, st := range sc.Steps {
		if err := s.step(i, st, res); err != nil {
			return nil, fmt.Errorf("steps[%d]: %w", i, err)
		}
		// After every step, and before every checkpoint, the system
		// settles again, as the oracle does (see engine.Settle).
		s.settle(true)
		if st.Expect != nil {
			cp := s.checkpoint(i)
			res.Checkpoints = append(res.Checkpoints, cp)
			res.Mismatches = append(res.Mismatches, Check(i, st.Expect, cp)...)
			s.evicted = map[string]string{}
		}
	}
	s.settle(true)
	res.Checkpoints = append(res.Checkpoints, s.checkpoint(len(sc.Steps)))
	res.Evictions = map[string]int{}
	for k, w := range s.eng.Workloads() {
		if w.Evictions > 0 {
			res.Evictions[k] = w.Evictions
		}
	}
	res.Warnings = s.warnings
	return res, nil
}

func (s *sim) step(i int, st Step, res *Result) error {
	switch {
	case st.Submit != nil:
		for j, o := range st.Submit {
			if err := s.submit(o); err != nil {
				return fmt.Errorf("submit[%d]: %w: %v", j, ErrMalformed, err)
			}
		}
	case st.Apply != nil:
		for j, o := range st.Apply {
			if err := api.Validate(o); err != nil {
				return fmt.Errorf("apply[%d]: %w: %v", j, ErrMalformed, err)
			}
			if err := s.each(func(e *engine.Engine) error { _, err := e.Apply(s.copyFor(e, o), s.now); return err }); err != nil {
				return fmt.Errorf("apply[%d]: %w: %v", j, ErrMalformed, err)
			}
		}
	case st.Delete != nil:
		for _, k := range st.Delete {
			if err := s.each(func(e *engine.Engine) error { return e.Delete(k, s.now) }); err != nil {
				return fmt.Errorf("delete %s: %w: %v", k, ErrMalformed, err)
			}
		}
	case st.Finish != nil:
		for _, k := range st.Finish {
			if err := s.each(func(e *engine.Engine) error { return e.Finish(k, s.now) }); err != nil {
				return fmt.Errorf("finish %s: %w: %v", k, ErrMalformed, err)
			}
		}
	case st.SetPriority != nil:
		for _, k := range sortedKeys(st.SetPriority) {
			if err := s.each(func(e *engine.Engine) error { return e.SetPriority(k, st.SetPriority[k], s.now) }); err != nil {
				return fmt.Errorf("setPriority %s: %w: %v", k, ErrMalformed, err)
			}
		}
	case st.PodsReady != nil:
		for _, k := range st.PodsReady {
			if err := s.each(func(e *engine.Engine) error { return e.PodsReady(k) }); errors.Is(err, engine.ErrNotAdmitted) {
				s.warnings = append(s.warnings, fmt.Sprintf("steps[%d].podsReady: %v; ignored", i, err))
			} else if err != nil {
				return fmt.Errorf("podsReady %s: %w: %v", k, ErrMalformed, err)
			}
		}
	case st.Advance != nil:
		s.advance(s.now.Add(*st.Advance))
	case st.Reject != nil:
		for j, d := range st.Reject {
			if err := s.rejects(d); err == nil {
				res.Mismatches = append(res.Mismatches, fmt.Sprintf("steps[%d].reject[%d]: was accepted, want an error", i, j))
			}
		}
	}
	return nil
}

// submit converts and validates a Workload or Job and gives it the next
// creation time: max(clock, previous creation + 1ms).
func (s *sim) submit(o api.Object) error {
	wl, err := s.toWorkload(o)
	if err != nil {
		return err
	}
	created := s.now
	if next := s.lastCreated.Add(time.Millisecond); !s.lastCreated.IsZero() && next.After(created) {
		created = next
	}
	if err := s.each(func(e *engine.Engine) error {
		_, err := e.Submit(s.copyFor(e, wl).(*api.Workload), created)
		return err
	}); err != nil {
		return err
	}
	s.lastCreated = created
	return nil
}

func (s *sim) toWorkload(o api.Object) (*api.Workload, error) {
	if err := api.Validate(o); err != nil {
		return nil, err
	}
	switch w := o.(type) {
	case *api.Workload:
		return w, nil
	case *api.Job:
		wl, err := api.JobToWorkload(w, s.eng)
		if err != nil {
			return nil, err
		}
		return wl, api.Validate(wl)
	}
	return nil, fmt.Errorf("%s: only Workload and batch/v1 Job can be submitted", api.ObjectRef(o))
}

// rejects returns nil when the document would be accepted, and changes
// nothing either way.
func (s *sim) rejects(doc json.RawMessage) error {
	objs, err := api.Decode(doc)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := api.Validate(o); err != nil {
			return err
		}
		switch w := o.(type) {
		case *api.Workload, *api.Job:
			wl, err := s.toWorkload(w)
			if err != nil {
				return err
			}
			if s.eng.Workload(api.NamespacedName(wl.Namespace, wl.Name)) != nil {
				return fmt.Errorf("workload %s/%s already exists", wl.Namespace, wl.Name)
			}
		default:
			if err := s.eng.CheckApply(o); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sim) checkpoint(step int) Checkpoint {
	wls := s.eng.Workloads()
	// Sized up front: on a large scenario growing these maps cost more
	// than filling them.
	cp := Checkpoint{Step: step, Admitted: make(map[string]map[string]map[string]string, len(wls)),
		Pending: []string{}, Inactive: []string{}, Finished: []string{}, Evicted: s.evicted,
		PodCounts: make(map[string]map[string]int32, len(wls))}
	for key, w := range wls {
		switch w.Status {
		case engine.Admitted:
			sh := s.shapes.of(w.Admission.PodSets)
			cp.Admitted[key] = sh.flavors
			cp.PodCounts[key] = sh.counts
		case engine.Pending:
			cp.Pending = append(cp.Pending, key)
		case engine.Inactive:
			cp.Inactive = append(cp.Inactive, key)
		case engine.Finished:
			cp.Finished = append(cp.Finished, key)
		}
	}
	slices.Sort(cp.Pending)
	slices.Sort(cp.Inactive)
	slices.Sort(cp.Finished)
	return cp
}

// shapes shares one copy of each distinct assignment (podSet names,
// counts and flavors) among a run's checkpoints. Most workloads of a
// queue are given the same one, and a copy per workload per checkpoint
// was the largest part of a big run's heap (34 of 80 MB on the 20,000-
// workload scenario of make bench-vs-kueue). The shared maps are never
// written after they are made; a Checkpoint's readers only read.
type shapes struct {
	byKey map[string]shape
	key   []byte
	pairs []shapePair
}

type shape struct {
	flavors map[string]map[string]string
	counts  map[string]int32
}

type shapePair struct{ resource, flavor string }

// of returns the shape of an admission's podSets.
func (s *shapes) of(podSets []scheduler.PodSetAdmission) shape {
	// The key spells the podSets in order, each with its count and its
	// flavors sorted by resource, the parts separated by bytes no name
	// holds (names are DNS labels, resources qualified names).
	k := s.key[:0]
	for _, p := range podSets {
		k = append(k, p.Name...)
		k = append(k, 0)
		k = strconv.AppendInt(k, int64(p.Count), 10)
		s.pairs = s.pairs[:0]
		for r, f := range p.Flavors {
			s.pairs = append(s.pairs, shapePair{string(r), f})
		}
		slices.SortFunc(s.pairs, func(a, b shapePair) int { return strings.Compare(a.resource, b.resource) })
		for _, rf := range s.pairs {
			k = append(k, 1)
			k = append(k, rf.resource...)
			k = append(k, 2)
			k = append(k, rf.flavor...)
		}
		k = append(k, 3)
	}
	s.key = k
	if sh, ok := s.byKey[string(k)]; ok {
		return sh
	}
	sh := shape{flavors: make(map[string]map[string]string, len(podSets)), counts: make(map[string]int32, len(podSets))}
	for _, p := range podSets {
		fl := make(map[string]string, len(p.Flavors))
		for r, f := range p.Flavors {
			fl[string(r)] = f
		}
		sh.flavors[p.Name] = fl
		sh.counts[p.Name] = p.Count
	}
	if s.byKey == nil {
		s.byKey = map[string]shape{}
	}
	s.byKey[string(k)] = sh
	return sh
}

// ExpectOf is the expectation that checkpoint cp meets in full (every
// field checked), for another runner of the same scenario: the services
// must observe at each expect step what the simulator did.
func ExpectOf(cp Checkpoint) *Expect {
	pending, inactive, finished := slices.Clone(cp.Pending), slices.Clone(cp.Inactive), slices.Clone(cp.Finished)
	return &Expect{Admitted: cp.Admitted, Pending: &pending, Evicted: cp.Evicted, Inactive: &inactive,
		Finished: &finished, PodCounts: cp.PodCounts, hasAdmitted: true, hasEvicted: true}
}

// Check compares one expect step with an observed checkpoint and returns
// the mismatches. The diffs are plain text so they read the same in every
// version. The end-to-end suite checks the services' state with it too.
func Check(step int, ex *Expect, got Checkpoint) []string {
	var out []string
	at := func(what string) string { return fmt.Sprintf("steps[%d].expect.%s", step, what) }
	set := func(what string, want, have []string) {
		if missing, extra := setDiff(want, have); len(missing)+len(extra) > 0 {
			out = append(out, fmt.Sprintf("%s: want %v, got %v (missing %v, unexpected %v)", at(what), want, have, missing, extra))
		}
	}
	if ex.hasAdmitted {
		set("admitted", sortedKeys(ex.Admitted), sortedKeys(got.Admitted))
		for _, key := range sortedKeys(ex.Admitted) {
			have, ok := got.Admitted[key]
			if !ok {
				continue
			}
			for _, ps := range sortedKeys(ex.Admitted[key]) {
				want := ex.Admitted[key][ps]
				if pick := pick(have[ps], want); !maps.Equal(pick, want) {
					out = append(out, fmt.Sprintf("%s: want %v, got %v", at(fmt.Sprintf("admitted[%s].%s", key, ps)), want, have[ps]))
				}
			}
		}
	}
	sorted := func(p *[]string) []string { v := slices.Clone(*p); slices.Sort(v); return v }
	if ex.Pending != nil {
		set("pending", sorted(ex.Pending), got.Pending)
	}
	if ex.Inactive != nil {
		set("inactive", sorted(ex.Inactive), got.Inactive)
	}
	if ex.Finished != nil {
		set("finished", sorted(ex.Finished), got.Finished)
	}
	if ex.hasEvicted && !maps.Equal(ex.Evicted, got.Evicted) && len(ex.Evicted)+len(got.Evicted) > 0 {
		out = append(out, fmt.Sprintf("%s: want %v, got %v", at("evicted"), ex.Evicted, got.Evicted))
	}
	for _, key := range sortedKeys(ex.PodCounts) {
		if !maps.Equal(ex.PodCounts[key], got.PodCounts[key]) {
			out = append(out, fmt.Sprintf("%s: want %v, got %v", at("podCounts["+key+"]"), ex.PodCounts[key], got.PodCounts[key]))
		}
	}
	return out
}

// setDiff returns what want has that have lacks, and the reverse.
func setDiff(want, have []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			extra = append(extra, h)
		}
	}
	return missing, extra
}

// pick keeps the resources the expectation names, so that an expectation
// may leave out resources it does not care about.
func pick(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for r := range want {
		if v, ok := have[r]; ok {
			out[r] = v
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
