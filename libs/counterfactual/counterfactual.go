// Package counterfactual finds the smallest changes that would admit a
// pending workload now. It is part of the pure core: no I/O, no clock.
//
//	State ──base run──▶ still pending? ──▶ for each kind of change:
//	    search the smallest change, each probe a fresh copy of the state
//	    with the change applied and run to quiescence by libs/engine
//	──▶ the changes whose run admitted the workload, with what else the
//	    run displaced (lost its admission) and admitted
//
// Every change shown was verified by the engine itself: a probe builds a
// fresh State (history.Builder), applies the change through the engine's
// public API (Apply, Finish, SetPriority, Delete and Submit), runs it to
// quiescence at now, and looks at the workload. Nothing is estimated.
//
// The kinds, in the order they are reported:
//
//   - Quota: more nominalQuota in the workload's ClusterQueue for the
//     flavor and resource(s) the core names as blocking; the smallest
//     amount per resource.
//   - BorrowingLimit: the workload's ClusterQueue's borrowingLimit for the
//     blocking cell higher by the smallest amount.
//   - LendingLimit: another member of the cohort lending more of the
//     blocking cell (lendingLimit higher by the smallest amount, at most
//     up to its nominalQuota).
//   - Finish: admitted workloads of the ClusterQueue or its cohort
//     finishing; the fewest, taken in order of how much of the blocking
//     resource each holds (largest first), then lowest priority.
//   - Toleration: the workload tolerating the taints of one flavor of its
//     ClusterQueue that it does not tolerate now: deleted and submitted
//     again with the tolerations, created now, as a user would.
//   - Priority: the workload's priority above the lowest threshold (a
//     priority held by another workload of the ClusterQueue or cohort) at
//     which it is admitted, usually by preempting.
//
// Probes are bounded (MaxProbes); a search that runs out says so.
package counterfactual

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Kinds of change.
const (
	KindQuota          = "Quota"
	KindBorrowingLimit = "BorrowingLimit"
	KindLendingLimit   = "LendingLimit"
	KindFinish         = "Finish"
	KindToleration     = "Toleration"
	KindPriority       = "Priority"
)

// Outcome of a search.
const (
	// Found: the workload is pending and Changes lists what admits it
	// (possibly nothing the search tried).
	Found = "Searched"
	// NotPending: the workload is not pending; nothing to search.
	NotPending = "NotPending"
	// AdmittedAsIs: a run of the current state admits it without any
	// change (a decision is in flight).
	AdmittedAsIs = "AdmittedWithoutChange"
)

// MaxProbes bounds the engine runs of one search.
const MaxProbes = 64

// maxFinishCandidates and maxPriorityThresholds bound those searches.
const (
	maxFinishCandidates   = 8
	maxPriorityThresholds = 12
)

// Ref names a workload; Hidden when the caller may not read it.
type Ref struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Hidden    bool   `json:"hidden,omitempty"`
}

func (r Ref) String() string {
	if r.Hidden {
		return "another workload"
	}
	return r.Namespace + "/" + r.Name
}

// Amount is how much more of one resource a change gives.
type Amount struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	// Value is in the core's units (milli-units for cpu, whole units
	// otherwise); Quantity is the same as a Kubernetes quantity.
	Value    int64  `json:"value"`
	Quantity string `json:"quantity"`
	// From and To are the limit before and after (Quota: nominalQuota).
	From string `json:"from"`
	To   string `json:"to"`
}

// Change is one verified counterfactual.
type Change struct {
	Kind string `json:"kind"`
	// ClusterQueue is the queue whose spec changes (Quota, limits), or the
	// workload's (Finish, Toleration, Priority).
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Cohort       string `json:"cohort,omitempty"`
	// Amounts are the extra quota or limit, per flavor and resource.
	Amounts []Amount `json:"amounts,omitempty"`
	// Workloads are the ones that would have to finish (Finish).
	Workloads []Ref `json:"workloads,omitempty"`
	// Flavor and Taints: the flavor whose taints it would tolerate.
	Flavor string         `json:"flavor,omitempty"`
	Taints []corev1.Taint `json:"taints,omitempty"`
	// ClusterQueueHidden is set when ClusterQueue (another member of the
	// cohort, LendingLimit) is one the caller may not read: its name and
	// its limits (Amounts' From and To) are left out.
	ClusterQueueHidden bool `json:"clusterQueueHidden,omitempty"`
	// Above is the priority it would have to exceed; Priority the value
	// tried (Above+1). Both are left out when only workloads the caller
	// may not read hold that priority: it is theirs.
	Above    *int32 `json:"above,omitempty"`
	Priority *int32 `json:"priority,omitempty"`
	// AboveHeldBy are the workloads whose priority is Above, so that
	// Redact can tell whose priority the threshold reveals; never sent.
	AboveHeldBy []Ref `json:"-"`
	// Displaces are the workloads that hold quota now and would not after
	// the change (preempted, or outrun); AlsoAdmitted those pending now
	// that the change admits too.
	Displaces    []Ref `json:"displaces"`
	AlsoAdmitted []Ref `json:"alsoAdmitted"`
	// Message says it in one sentence.
	Message string `json:"message"`
}

// Result is a search's answer.
type Result struct {
	Outcome string   `json:"outcome"`
	Changes []Change `json:"changes"`
	// Probes counts the engine runs the search needed, as if made one
	// after another (see first); Exhausted is set when MaxProbes cut a
	// search short (some kinds may be missing).
	Probes    int  `json:"probes"`
	Exhausted bool `json:"exhausted,omitempty"`
}

// Search finds the changes that admit the workload key at now, on copies
// of the state build returns. build may be called on several goroutines
// at once.
func Search(build func() (*history.State, error), key string, now time.Time) (Result, error) {
	base, err := build()
	if err != nil {
		return Result{}, err
	}
	return SearchFrom(base, build, key, now)
}

// searchFrom is SearchFromWithin.
func searchFrom(base *history.State, build func() (*history.State, error), key string, now time.Time, b Budget) (Result, error) {
	s := &search{build: build, key: key, now: now, budget: b}
	w := base.Engine.Workload(key)
	if w == nil {
		return Result{}, fmt.Errorf("workload %s: %w", key, engine.ErrNotFound)
	}
	if w.Status != engine.Pending {
		return Result{Outcome: NotPending, Changes: []Change{}}, nil
	}
	s.fast = s.trimmed(base)
	base.Engine.RunToRest(now)
	base.Engine.DrainEvictions()
	s.probes = 1
	if base.Engine.Workload(key).Status == engine.Admitted {
		return Result{Outcome: AdmittedAsIs, Changes: []Change{}, Probes: 1}, nil
	}
	s.base = base
	s.admitted = admittedSet(base.Engine)
	s.wl = base.Engine.Workload(key)
	s.cq = s.wl.Info.ClusterQueue
	res := Result{Outcome: Found, Changes: []Change{}}
	for _, find := range []func() []Change{s.quota, s.borrowing, s.lending, s.finish, s.toleration, s.priority} {
		res.Changes = append(res.Changes, find()...)
	}
	if err := s.stopped(); err != nil {
		return Result{}, err
	}
	for i := range res.Changes {
		res.Changes[i].Message = Describe(res.Changes[i], key)
	}
	res.Probes, res.Exhausted = s.probes, s.exhausted
	return res, nil
}

type search struct {
	build func() (*history.State, error)
	// fast makes the copies of every probe but Quota's (see trimmed).
	fast      func() (*history.State, error)
	key       string
	now       time.Time
	base      *history.State
	admitted  map[string]bool
	wl        *engine.Workload
	cq        string
	probes    int
	exhausted bool
	// budget bounds the search; stop holds the first error its Stop
	// answered (under stopMu: probes run on several goroutines).
	budget Budget
	stopMu sync.Mutex
	stop   error
}

// probe is the outcome of one engine run with a change.
type probe struct {
	admitted bool
	reason   *scheduler.Reason
	after    map[string]bool
	eng      *engine.Engine
}

var errBudget = errors.New("probe budget spent")

// try builds a fresh state, applies change and runs it to quiescence.
// Its copies are trimmed (see trimmed): every change but a raised
// nominalQuota goes through try.
func (s *search) try(change func(*history.State) error) (probe, error) {
	return s.tryOn(s.fast, change)
}

// tryFull is try on whole copies, for the changes Trim does not allow.
func (s *search) tryFull(change func(*history.State) error) (probe, error) {
	return s.tryOn(s.build, change)
}

func (s *search) tryOn(build func() (*history.State, error), change func(*history.State) error) (probe, error) {
	if s.probes >= s.maxProbes() {
		s.exhausted = true
		return probe{}, errBudget
	}
	if err := s.asked(); err != nil {
		return probe{}, err
	}
	s.probes++
	return s.run(build, change)
}

// run is one probe, uncounted; it may run on several goroutines at once.
func (s *search) run(build func() (*history.State, error), change func(*history.State) error) (probe, error) {
	st, err := build()
	if err != nil {
		return probe{}, err
	}
	if err := change(st); err != nil {
		return probe{}, err
	}
	st.Engine.RunToRest(s.now)
	st.Engine.DrainEvictions()
	w := st.Engine.Workload(s.key)
	p := probe{after: admittedSet(st.Engine), eng: st.Engine}
	if w != nil {
		p.admitted = w.Status == engine.Admitted
		p.reason = w.Reason
	}
	return p, nil
}

// trimmed returns a builder of copies of base, which no run has changed
// yet, with what no run can reach left out (engine.Unreachable: behind a
// long StrictFIFO backlog, nearly all of it). They decide every change of
// the search as whole copies would, but a raised nominalQuota. A copy of
// 100,000 workloads is most of a probe; of what a run can reach, a few
// hundred.
func (s *search) trimmed(base *history.State) func() (*history.State, error) {
	if !trimProbes {
		return s.build
	}
	drop := base.Engine.Unreachable(s.key, s.now)
	if len(drop) == 0 {
		return s.build
	}
	st := base.With(base.Engine.CloneWithout(drop))
	return func() (*history.State, error) { return st.With(st.Engine.Clone()), nil }
}

// effects fills what a verified change displaces and admits besides.
func (s *search) effects(c *Change, p probe, changed map[string]bool) {
	c.Displaces, c.AlsoAdmitted = []Ref{}, []Ref{}
	for _, k := range sortedKeys(s.admitted) {
		if !p.after[k] && !changed[k] {
			c.Displaces = append(c.Displaces, ref(k))
		}
	}
	for _, k := range sortedKeys(p.after) {
		if !s.admitted[k] && k != s.key {
			c.AlsoAdmitted = append(c.AlsoAdmitted, ref(k))
		}
	}
}

func admittedSet(e *engine.Engine) map[string]bool {
	out := map[string]bool{}
	for k, w := range e.Workloads() {
		if w.Status == engine.Admitted {
			out[k] = true
		}
	}
	return out
}

func ref(key string) Ref {
	ns, name, _ := strings.Cut(key, "/")
	return Ref{Namespace: ns, Name: name}
}

// cell is one flavor and resource.
type cell = quota.FlavorResource

// blocking is the cell the base run names as blocking, if any.
func (s *search) blocking() (cell, int64, bool) {
	r := s.wl.Reason
	if r == nil || r.Flavor == "" || r.Resource == "" {
		return cell{}, 0, false
	}
	return cell{Flavor: r.Flavor, Resource: corev1.ResourceName(r.Resource)}, r.Shortfall, true
}

// limitKind selects the field of a ClusterQueue's resource quota a change
// raises.
type limitKind int

const (
	nominal limitKind = iota
	borrowing
	lending
)

// raised returns a copy of cq with one limit of cell c raised by d, or
// false when the cell is not in its spec, the limit is unset (for
// borrowing and lending), the sum overflows or the result is invalid.
func raised(cq *api.ClusterQueue, c cell, k limitKind, d int64) (*api.ClusterQueue, string, string, bool) {
	out := cq.DeepCopy()
	for gi := range out.Spec.ResourceGroups {
		for fi := range out.Spec.ResourceGroups[gi].Flavors {
			f := &out.Spec.ResourceGroups[gi].Flavors[fi]
			if f.Name != c.Flavor {
				continue
			}
			for ri := range f.Resources {
				r := &f.Resources[ri]
				if r.Name != c.Resource {
					continue
				}
				var q *resource.Quantity
				switch k {
				case nominal:
					q = &r.NominalQuota
				case borrowing:
					q = r.BorrowingLimit
				case lending:
					q = r.LendingLimit
				}
				if q == nil {
					return nil, "", "", false
				}
				old, ok := quota.ValueExact(c.Resource, *q)
				if !ok {
					return nil, "", "", false
				}
				v, ok := quota.AddInt(old, d)
				if !ok {
					return nil, "", "", false
				}
				*q = quantity(c.Resource, v)
				if api.Validate(out) != nil {
					return nil, "", "", false
				}
				return out, quota.Format(c.Resource, old), quota.Format(c.Resource, v), true
			}
		}
	}
	return nil, "", "", false
}

// quantity is v (in the core's units of name) as a Kubernetes quantity.
func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		return *resource.NewQuantity(v, resource.BinarySI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

// applySpecs applies modified ClusterQueues to a state.
func (s *search) applySpecs(cqs ...*api.ClusterQueue) func(*history.State) error {
	return func(st *history.State) error {
		for _, cq := range cqs {
			if _, err := st.Engine.Apply(cq.DeepCopy(), s.now); err != nil {
				return err
			}
		}
		return nil
	}
}

// smallest finds the least d in [1, hi] for which admits holds, given
// that admits(guess) is known to hold. It tests guess-1 first: the core's
// shortfall is usually exact.
func smallest(guess int64, admits func(int64) (bool, error)) (int64, error) {
	if guess <= 1 {
		return guess, nil
	}
	ok, err := admits(guess - 1)
	if err != nil || !ok {
		return guess, err
	}
	lo, hi := int64(1), guess-1 // admits(hi) holds
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := admits(mid)
		if err != nil {
			return hi, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, nil
}

// grow finds some d in [start, max] for which admits holds, doubling from
// start; 0 when none is found.
func grow(start, most int64, admits func(int64) (bool, error)) (int64, error) {
	d := max(1, min(start, most))
	for range maxDoublings {
		ok, err := admits(d)
		if err != nil || ok {
			if !ok {
				d = 0
			}
			return d, err
		}
		if d >= most {
			return 0, nil
		}
		next, okAdd := quota.AddInt(d, d)
		if !okAdd || next > most {
			next = most
		}
		d = next
	}
	return 0, nil
}

// maxDoublings bounds grow.
const maxDoublings = 6

// quota: more nominalQuota in the workload's ClusterQueue, one cell after
// another as the core names them, then each reduced to its smallest.
func (s *search) quota() []Change {
	spec := s.base.ClusterQueues[s.cq]
	first, short, ok := s.blocking()
	if spec == nil || !ok {
		return nil
	}
	extra := map[cell]int64{}
	c, d := first, max(short, 1)
	var last probe
	for range 4 {
		if _, _, _, ok := raised(spec, c, nominal, 1); !ok {
			return nil
		}
		extra[c] += d
		mod, ok := s.withExtra(spec, extra, nominal)
		if !ok {
			return nil
		}
		p, err := s.tryFull(s.applySpecs(mod))
		if err != nil {
			return nil
		}
		if p.admitted {
			last = p
			break
		}
		r := p.reason
		if r == nil || r.Flavor == "" || r.Resource == "" || r.Shortfall <= 0 {
			return nil
		}
		c, d = cell{Flavor: r.Flavor, Resource: corev1.ResourceName(r.Resource)}, r.Shortfall
	}
	if !last.admitted {
		return nil
	}
	// Each cell to its smallest, the others held.
	for _, k := range sortedCells(extra) {
		v, err := smallest(extra[k], func(x int64) (bool, error) {
			trial := maps(extra)
			trial[k] = x
			mod, ok := s.withExtra(spec, trial, nominal)
			if !ok {
				return false, nil
			}
			p, err := s.tryFull(s.applySpecs(mod))
			if err == nil && p.admitted {
				last = p
			}
			return err == nil && p.admitted, err
		})
		if err != nil && !errors.Is(err, errBudget) {
			return nil
		}
		extra[k] = v
	}
	mod, _ := s.withExtra(spec, extra, nominal)
	p, err := s.tryFull(s.applySpecs(mod))
	if err != nil || !p.admitted {
		return nil
	}
	ch := Change{Kind: KindQuota, ClusterQueue: s.cq, Cohort: spec.Spec.Cohort, Amounts: s.amounts(spec, extra, nominal)}
	s.effects(&ch, p, nil)
	return []Change{ch}
}

func maps(m map[cell]int64) map[cell]int64 {
	out := make(map[cell]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// withExtra is spec with every cell's limit raised.
func (s *search) withExtra(spec *api.ClusterQueue, extra map[cell]int64, k limitKind) (*api.ClusterQueue, bool) {
	out := spec
	for _, c := range sortedCells(extra) {
		var ok bool
		if out, _, _, ok = raised(out, c, k, extra[c]); !ok {
			return nil, false
		}
	}
	return out, true
}

func (s *search) amounts(spec *api.ClusterQueue, extra map[cell]int64, k limitKind) []Amount {
	var out []Amount
	for _, c := range sortedCells(extra) {
		_, from, to, _ := raised(spec, c, k, extra[c])
		out = append(out, Amount{Flavor: c.Flavor, Resource: string(c.Resource), Value: extra[c],
			Quantity: quota.Format(c.Resource, extra[c]), From: from, To: to})
	}
	return out
}

// limit searches the smallest raise of one limit of one queue's cell.
func (s *search) limit(queue string, k limitKind, c cell, guess, most int64) (Change, bool) {
	spec := s.base.ClusterQueues[queue]
	if spec == nil || most < 1 {
		return Change{}, false
	}
	if _, _, _, ok := raised(spec, c, k, 1); !ok {
		return Change{}, false
	}
	admits := func(x int64) (bool, error) {
		mod, _, _, ok := raised(spec, c, k, x)
		if !ok {
			return false, nil
		}
		p, err := s.try(s.applySpecs(mod))
		return err == nil && p.admitted, err
	}
	d, err := grow(max(guess, 1), most, admits)
	if err != nil || d == 0 {
		return Change{}, false
	}
	if d, err = smallest(d, admits); err != nil && !errors.Is(err, errBudget) {
		return Change{}, false
	}
	mod, _, _, _ := raised(spec, c, k, d)
	p, err := s.try(s.applySpecs(mod))
	if err != nil || !p.admitted {
		return Change{}, false
	}
	kind := KindBorrowingLimit
	if k == lending {
		kind = KindLendingLimit
	}
	ch := Change{Kind: kind, ClusterQueue: queue, Cohort: spec.Spec.Cohort, Amounts: s.amounts(spec, map[cell]int64{c: d}, k)}
	s.effects(&ch, p, nil)
	return ch, true
}

// borrowing: the workload's ClusterQueue may borrow more of the cell.
func (s *search) borrowing() []Change {
	c, short, ok := s.blocking()
	spec := s.base.ClusterQueues[s.cq]
	if !ok || spec == nil || spec.Spec.Cohort == "" {
		return nil
	}
	if ch, ok := s.limit(s.cq, borrowing, c, short, math.MaxInt64/2); ok {
		return []Change{ch}
	}
	return nil
}

// lending: another member of the cohort lends more of the cell, up to its
// nominalQuota.
func (s *search) lending() []Change {
	c, short, ok := s.blocking()
	spec := s.base.ClusterQueues[s.cq]
	if !ok || spec == nil || spec.Spec.Cohort == "" {
		return nil
	}
	var out []Change
	snap := s.base.Engine.Snapshot()
	for _, name := range sortedKeys(s.base.ClusterQueues) {
		other := s.base.ClusterQueues[name]
		if name == s.cq || other.Spec.Cohort != spec.Spec.Cohort {
			continue
		}
		sc := snap.ClusterQueues[name]
		if sc == nil {
			continue
		}
		l, ok := sc.Limits[c]
		if !ok || l.LendingLimit == nil || *l.LendingLimit >= l.Nominal {
			continue
		}
		if ch, ok := s.limit(name, lending, c, short, l.Nominal-*l.LendingLimit); ok {
			out = append(out, ch)
		}
	}
	return out
}

// finish: admitted workloads of the queue or its cohort finishing.
func (s *search) finish() []Change {
	c, short, known := s.blocking()
	snap := s.base.Engine.Snapshot()
	me := snap.ClusterQueues[s.cq]
	if me == nil {
		return nil
	}
	type cand struct {
		key  string
		held int64
		prio int32
	}
	var cands []cand
	for k := range s.admitted {
		w := s.base.Engine.Workload(k)
		in := w.Admission.ClusterQueue
		other := snap.ClusterQueues[in]
		if in != s.cq && (other == nil || me.Cohort == nil || other.Cohort != me.Cohort) {
			continue
		}
		held := int64(0)
		if known {
			held = w.Admission.Usage[c]
			if held == 0 {
				continue
			}
		}
		cands = append(cands, cand{key: k, held: held, prio: w.Info.Priority})
	}
	slices.SortFunc(cands, func(a, b cand) int {
		switch {
		case a.held != b.held:
			return cmpInt(b.held, a.held)
		case a.prio != b.prio:
			return cmpInt(int64(a.prio), int64(b.prio))
		}
		return strings.Compare(a.key, b.key)
	})
	if len(cands) > maxFinishCandidates {
		cands = cands[:maxFinishCandidates]
	}
	// The trials: the n largest holders finishing, for each n whose sum
	// can free the shortfall.
	var trials [][]string
	var sum int64
	for n := 1; n <= len(cands); n++ {
		sum = quota.SatAdd(sum, cands[n-1].held)
		if known && sum < short {
			continue // cannot free enough: no probe
		}
		keys := make([]string, n)
		for i, cd := range cands[:n] {
			keys[i] = cd.key
		}
		trials = append(trials, keys)
	}
	i, p, err := s.first(len(trials), func(i int) func(*history.State) error {
		return func(st *history.State) error {
			for _, k := range trials[i] {
				if err := st.Engine.Finish(k, s.now); err != nil {
					return err
				}
			}
			return nil
		}
	})
	if err != nil || i < 0 {
		return nil
	}
	keys := trials[i]
	set := map[string]bool{}
	ch := Change{Kind: KindFinish, ClusterQueue: s.cq, Cohort: cohortName(me)}
	for _, k := range keys {
		set[k] = true
		ch.Workloads = append(ch.Workloads, ref(k))
	}
	s.effects(&ch, p, set)
	return []Change{ch}
}

// first runs the probes change(0), change(1), … and returns the first
// that admits the workload, as trying them one after another would: the
// same index (-1 for none), the same error (the first probe in order
// that failed before any admitted), and the same count of probes and
// budget spent. The probes are independent copies, so they run
// probeWorkers at a time, in order; a probe past the first that admits
// may have started, and is not counted.
func (s *search) first(n int, change func(int) func(*history.State) error) (int, probe, error) {
	budget := s.maxProbes() - s.probes
	over := n > budget
	n = min(n, max(budget, 0))
	type outcome struct {
		p   probe
		err error
		ok  bool
	}
	out := make([]outcome, n)
	var mu sync.Mutex
	found := n // the least index that admitted or failed
	next := 0
	var wg sync.WaitGroup
	for range min(s.workers(), n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				if i >= found {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				var p probe
				err := s.asked()
				if err == nil {
					p, err = s.run(s.fast, change(i))
				}
				mu.Lock()
				out[i] = outcome{p: p, err: err, ok: true}
				if (err != nil || p.admitted) && i < found {
					found = i
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if found < n {
		s.probes += found + 1
		o := out[found]
		if o.err != nil {
			return -1, probe{}, o.err
		}
		return found, o.p, nil
	}
	s.probes += n
	if over {
		s.exhausted = true
		return -1, probe{}, errBudget
	}
	return -1, probe{}, nil
}

// trimProbes lets a test search on whole copies (TestTrimmedSearchAsWhole).
var trimProbes = true

// probeWorkers is how many probes of one search run at once.
var probeWorkers = max(1, min(runtime.GOMAXPROCS(0), 4))

func cohortName(cq *scheduler.ClusterQueue) string {
	if cq.Cohort == nil {
		return ""
	}
	return cq.Cohort.Name
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// toleration: the workload tolerating one flavor's taints.
func (s *search) toleration() []Change {
	snap := s.base.Engine.Snapshot()
	me := snap.ClusterQueues[s.cq]
	if me == nil {
		return nil
	}
	var out []Change
	seen := map[string]bool{}
	for _, g := range me.Groups {
		for _, fname := range g.Flavors {
			f := snap.Flavors[fname]
			if f == nil || seen[fname] {
				continue
			}
			seen[fname] = true
			taints := untolerated(f.Taints, s.wl.Info.PodSets)
			if len(taints) == 0 {
				continue
			}
			tolerate := func(pss []scheduler.PodSet) {
				for i := range pss {
					for _, t := range taints {
						pss[i].Tolerations = append(pss[i].Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
					}
					if t := taints[0]; t.Value == "" {
						tl := pss[i].Tolerations
						for j := range tl {
							if tl[j].Key == t.Key && tl[j].Value == "" && tl[j].Operator == corev1.TolerationOpEqual {
								tl[j].Operator = corev1.TolerationOpExists
							}
						}
					}
				}
			}
			// A workload's spec is not updated in place: the user
			// deletes it and submits it again (Resubmit).
			p, err := s.try(func(st *history.State) error {
				return st.Engine.Resubmit(s.key, s.now, tolerate)
			})
			if err != nil {
				return out
			}
			if !p.admitted {
				continue
			}
			ch := Change{Kind: KindToleration, ClusterQueue: s.cq, Flavor: fname, Taints: taints}
			s.effects(&ch, p, nil)
			out = append(out, ch)
		}
	}
	return out
}

// untolerated lists the scheduling taints of a flavor that some podSet
// does not tolerate.
func untolerated(taints []corev1.Taint, podSets []scheduler.PodSet) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		for _, ps := range podSets {
			if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), []corev1.Taint{t}, ps.Tolerations, nil, false); bad {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// priority: the lowest threshold above which the workload is admitted.
func (s *search) priority() []Change {
	snap := s.base.Engine.Snapshot()
	me := snap.ClusterQueues[s.cq]
	if me == nil {
		return nil
	}
	mine := s.wl.Info.Priority
	levels := map[int32][]Ref{}
	for _, w := range s.base.Engine.Workloads() {
		if w.Status != engine.Admitted && w.Status != engine.Pending {
			continue
		}
		in := w.Info.ClusterQueue
		if w.Admission != nil {
			in = w.Admission.ClusterQueue
		}
		other := snap.ClusterQueues[in]
		if in != s.cq && (other == nil || me.Cohort == nil || other.Cohort != me.Cohort) {
			continue
		}
		if p := w.Info.Priority; p >= mine && p < math.MaxInt32 {
			levels[p] = append(levels[p], Ref{Namespace: w.Object.Namespace, Name: w.Object.Name})
		}
	}
	thresholds := sortedKeys(levels)
	if len(thresholds) > maxPriorityThresholds {
		thresholds = thresholds[:maxPriorityThresholds]
	}
	for _, above := range thresholds {
		v := above + 1
		p, err := s.try(func(st *history.State) error { return st.Engine.SetPriority(s.key, v, s.now) })
		if err != nil {
			return nil
		}
		if !p.admitted {
			continue
		}
		a := above
		// Sorted: the workloads come from a map.
		slices.SortFunc(levels[above], func(x, y Ref) int { return strings.Compare(x.String(), y.String()) })
		ch := Change{Kind: KindPriority, ClusterQueue: s.cq, Cohort: cohortName(me), Above: &a, Priority: &v, AboveHeldBy: levels[above]}
		s.effects(&ch, p, nil)
		return []Change{ch}
	}
	return nil
}

// Visibility is what a caller may read: the workloads of a namespace,
// and a ClusterQueue by name.
type Visibility struct {
	Namespace    func(namespace string) bool
	ClusterQueue func(name string) bool
}

// Redact leaves in r only what the caller may read: a workload of a
// namespace it may not read becomes a hidden Ref (counted, not named);
// a ClusterQueue it may not read loses its name and limits; a priority
// threshold held only by workloads it may not read is left out, as it is
// their priority. Messages are rewritten.
func (r *Result) Redact(key string, v Visibility) {
	hide := func(refs []Ref) {
		for i := range refs {
			if !refs[i].Hidden && !v.Namespace(refs[i].Namespace) {
				refs[i] = Ref{Hidden: true}
			}
		}
	}
	for i := range r.Changes {
		c := &r.Changes[i]
		hide(c.Workloads)
		hide(c.Displaces)
		hide(c.AlsoAdmitted)
		if c.ClusterQueue != "" && !v.ClusterQueue(c.ClusterQueue) {
			c.ClusterQueue, c.ClusterQueueHidden = "", true
			for j := range c.Amounts {
				c.Amounts[j].From, c.Amounts[j].To = "", ""
			}
		}
		if c.Above != nil && !slices.ContainsFunc(c.AboveHeldBy, func(h Ref) bool { return !h.Hidden && v.Namespace(h.Namespace) }) {
			c.Above, c.Priority = nil, nil
		}
		c.AboveHeldBy = nil
		c.Message = Describe(*c, key)
	}
}

// Describe says a change in one sentence.
func Describe(c Change, key string) string {
	var b strings.Builder
	b.WriteString("admissible if ")
	switch c.Kind {
	case KindQuota:
		fmt.Fprintf(&b, "ClusterQueue %s had %s", c.ClusterQueue, amountList(c.Amounts))
		if c.Cohort != "" {
			fmt.Fprintf(&b, " (so cohort %s too)", c.Cohort)
		}
	case KindBorrowingLimit, KindLendingLimit:
		field := "borrowingLimit"
		if c.Kind == KindLendingLimit {
			field = "lendingLimit"
		}
		for i, a := range c.Amounts {
			if i > 0 {
				b.WriteString(" and ")
			}
			if c.ClusterQueueHidden {
				fmt.Fprintf(&b, "another ClusterQueue's %s for %s on %s were %s higher", field, a.Resource, a.Flavor, a.Quantity)
				continue
			}
			fmt.Fprintf(&b, "ClusterQueue %s's %s for %s on %s were %s higher (%s instead of %s)", c.ClusterQueue, field, a.Resource, a.Flavor, a.Quantity, a.To, a.From)
		}
	case KindFinish:
		fmt.Fprintf(&b, "%s finished", strings.Join(refList(c.Workloads), " and "))
	case KindToleration:
		ts := make([]string, 0, len(c.Taints))
		for _, t := range c.Taints {
			ts = append(ts, t.ToString())
		}
		fmt.Fprintf(&b, "it tolerated taint %s, on flavor %s", strings.Join(ts, ", "), c.Flavor)
	case KindPriority:
		if c.Above == nil {
			b.WriteString("its priority were above that of a workload of another namespace")
		} else {
			fmt.Fprintf(&b, "its priority were above %d", *c.Above)
		}
	}
	if len(c.Displaces) > 0 {
		verb := " (it would displace "
		if c.Kind == KindPriority {
			verb = " (it would preempt "
		}
		b.WriteString(verb + strings.Join(refList(c.Displaces), ", ") + ")")
	}
	return b.String()
}

// refList names the visible workloads and counts the hidden ones after
// them: one is "another workload", more "N workloads of other namespaces".
func refList(refs []Ref) []string {
	out := make([]string, 0, len(refs))
	hidden := 0
	for _, r := range refs {
		if r.Hidden {
			hidden++
			continue
		}
		out = append(out, r.String())
	}
	switch {
	case hidden == 1:
		out = append(out, Ref{Hidden: true}.String())
	case hidden > 1:
		out = append(out, fmt.Sprintf("%d workloads of other namespaces", hidden))
	}
	return out
}

func amountList(as []Amount) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s more %s on %s", a.Quantity, a.Resource, a.Flavor))
	}
	return strings.Join(parts, " and ")
}

func sortedCells(m map[cell]int64) []cell {
	out := make([]cell, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b cell) int { return a.Compare(b) })
	return out
}

type ordered interface{ ~string | ~int32 | ~int64 }

func sortedKeys[K ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
