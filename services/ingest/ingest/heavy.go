package ingest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/whatif"
)

// Heavy reads simulate or replay: ETAs (GET /v1/eta, ?eta=true), explain
// with ?at= or counterfactuals, lists and ClusterQueues at a point in
// time, what-ifs. Over a large backlog each costs seconds of CPU, where
// every other request is a query of the projection. As the Kubernetes API
// server's priority and fairness gives each flow a share of its seats,
// they get a bounded share of ingest, so that one tenant's backlog does
// not slow another tenant's reads, nor, on a small machine, admission:
//
//	request ──the caller's share: PerCaller in flight or waiting── full: 429
//	        ──a seat: Global at once, waited for in order, at most
//	          QueueWait and the request's life─────────────────── none: 503
//	        ──the computation, bounded in steps (ETAWork, WhatIfSteps,
//	          counterfactual.MaxProbes, MaxReplayEvents), asking the
//	          request's context between steps── past its budget: 503;
//	          the client gone: it stops
//
// A seat is about one core: a counterfactual search runs its probes on
// more goroutines only with seats nobody waits for (extraSeats).

// counterfactualWorkers is the most probes one counterfactual search runs
// at once, seats permitting.
const counterfactualWorkers = 4

// HeavyLimits bound the heavy reads (docs/limits.md).
type HeavyLimits struct {
	// Global is how many heavy reads run at once on this server; 0:
	// autoSeats.
	Global int
	// PerCaller is how many one identity may have running or waiting.
	PerCaller int
	// QueueWait is the longest a read waits for a seat (negative: none).
	QueueWait time.Duration
	// ETAWork bounds the simulation of one ETA request, in steps times
	// pending workloads: a step's cost grows with the pending workloads
	// (each run of the core goes over them), so that the bound is about
	// as much CPU over a small backlog as over a large one.
	ETAWork int
	// WhatIfSteps bounds the simulated steps of one what-if.
	WhatIfSteps int
	// CPUShare is the share of a core one heavy read's simulation may
	// take (snapshot.Pacer); 1 or more does not pace.
	CPUShare float64
}

// DefaultHeavyLimits are the flags' defaults. Global 0 is autoSeats.
var DefaultHeavyLimits = HeavyLimits{
	Global:      0,
	PerCaller:   2,
	QueueWait:   5 * time.Second,
	ETAWork:     100_000,
	WhatIfSteps: 200_000,
	CPUShare:    0.5,
}

// autoSeats is a seat per core but one, from 1 to 4: heavy reads never
// take every core from the deciders sharing a small machine.
func autoSeats() int { return min(max(runtime.GOMAXPROCS(0)-1, 1), 4) }

// withDefaults fills the limits left at zero (a Config built in code).
func (l HeavyLimits) withDefaults() HeavyLimits {
	d := DefaultHeavyLimits
	if l.Global <= 0 {
		l.Global = autoSeats()
	}
	for _, f := range []struct{ v, def *int }{{&l.PerCaller, &d.PerCaller},
		{&l.ETAWork, &d.ETAWork}, {&l.WhatIfSteps, &d.WhatIfSteps}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.CPUShare <= 0 {
		l.CPUShare = d.CPUShare
	}
	switch {
	case l.QueueWait == 0:
		l.QueueWait = d.QueueWait
	case l.QueueWait < 0:
		l.QueueWait = 0 // no wait
	}
	return l
}

// registerHeavyFlags declares the heavy reads' flags (RegisterFlags).
func registerHeavyFlags(fs *flag.FlagSet, c *Config) {
	h := DefaultHeavyLimits
	c.Heavy = &h
	positive := func(name, usage string, p *int) { fs.Var(&intAtLeast{p: p, least: 1}, name, usage) }
	fs.Var(&intAtLeast{p: &h.Global}, "heavy-reads", "heavy reads (ETAs, counterfactuals, point-in-time answers, what-ifs) computed at once; one more waits for a seat, then gets 503 (0: a seat per core but one, from 1 to 4)")
	positive("heavy-reads-per-caller", "heavy reads one identity may have running or waiting; one more gets 429", &h.PerCaller)
	fs.DurationVar(&h.QueueWait, "heavy-read-queue-wait", h.QueueWait, "longest a heavy read waits for a seat before 503")
	positive("heavy-read-eta-work", "simulation one ETA request may run before 503, in steps times pending workloads (a retry goes on from there)", &h.ETAWork)
	positive("heavy-read-whatif-steps", "simulated steps one what-if may take before 503", &h.WhatIfSteps)
	fs.Float64Var(&h.CPUShare, "heavy-read-cpu-share", h.CPUShare, "share of a core one heavy read's simulation may take: it rests between its steps in proportion to its work (1: no rests)")
}

// intAtLeast is an integer flag that refuses values below least: a limit
// of 0 would mean no read at all, not "unlimited".
type intAtLeast struct {
	p     *int
	least int
}

func (f *intAtLeast) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f *intAtLeast) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < f.least {
		return fmt.Errorf("must be an integer of at least %d", f.least)
	}
	*f.p = n
	return nil
}

// heavyState is a server's limiter, and the test hook of its
// computations' steps.
type heavyState struct {
	lim   HeavyLimits
	seats *fairSeats
	mu    sync.Mutex
	// callers counts each identity's reads running or waiting.
	callers map[string]int
	// step, when set (tests), runs before each step of a computation
	// with what it is ("eta", "fold", "counterfactual", "whatif") and
	// the request's context.
	step func(ctx context.Context, what string)
	// sleep is the pacer's rest; nil is a timer (tests count it).
	sleep func(ctx context.Context, d time.Duration) error
}

func (s *Server) heavy() *heavyState {
	s.heavyOnce.Do(func() {
		lim := DefaultHeavyLimits
		if s.cfg.Heavy != nil {
			lim = *s.cfg.Heavy
		}
		lim = lim.withDefaults()
		s.heavyState = &heavyState{lim: lim, seats: newFairSeats(lim.Global), callers: map[string]int{}}
	})
	return s.heavyState
}

// heavySeat takes a seat for one heavy read of r's caller, or answers 429
// (the caller's share is full) or 503 (no seat within QueueWait). The
// caller calls release once the read is computed.
func (s *Server) heavySeat(r *http.Request) (release func(), err error) {
	u, err := s.caller(r)
	if err != nil {
		return nil, err
	}
	h := s.heavy()
	h.mu.Lock()
	if h.callers[u.Name] >= h.lim.PerCaller {
		h.mu.Unlock()
		return nil, fail(http.StatusTooManyRequests, "", "", fmt.Sprintf(
			"too many heavy reads (ETAs, counterfactuals, point-in-time answers, what-ifs) of yours at once: at most %d; retry once one has answered", h.lim.PerCaller))
	}
	h.callers[u.Name]++
	h.mu.Unlock()
	left := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.callers[u.Name]--; h.callers[u.Name] <= 0 {
			delete(h.callers, u.Name)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.lim.QueueWait)
	defer cancel()
	if err := h.seats.acquire(ctx, u.Name); err != nil {
		left()
		if r.Context().Err() != nil {
			return nil, stopped(r.Context().Err())
		}
		return nil, fail(http.StatusServiceUnavailable, "", "", fmt.Sprintf(
			"the server computes %d heavy reads (ETAs, counterfactuals, point-in-time answers, what-ifs) at once and none ended within %s; retry later", h.lim.Global, h.lim.QueueWait))
	}
	return func() {
		h.seats.release(u.Name, 1)
		left()
	}, nil
}

// extraSeats takes up to n more seats that nobody waits for, for a
// computation that can use more than one core; release gives them back.
func (s *Server) extraSeats(r *http.Request, n int) (got int, release func()) {
	u, err := s.caller(r)
	if err != nil {
		return 0, func() {}
	}
	h := s.heavy()
	got = h.seats.tryExtra(u.Name, n)
	return got, func() { h.seats.release(u.Name, got) }
}

// stopper is the Stop of a computation of the request whose context is
// ctx: what the budgets of libs/eta, libs/counterfactual and libs/whatif
// ask between steps, so that the core itself reads no clock.
//
// A simulation (not a fold, which may run under the ETA cache's lock) is
// also paced to CPUShare of a core: between its steps it rests in
// proportion to the time it ran, as a compaction does (snapshot.Pacer),
// so that a seat leaves most of its core to the other callers' requests
// and to the deciders sharing a small machine.
func (s *Server) stopper(ctx context.Context, what string) func() error {
	h := s.heavy()
	var mu sync.Mutex // a counterfactual search asks from its workers
	pacer := &snapshot.Pacer{Share: h.lim.CPUShare, Sleep: h.sleep}
	var rested time.Time
	return func() error {
		if h.step != nil {
			h.step(ctx, what)
		}
		if err := ctx.Err(); err != nil || what == "fold" {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		// Rest once per paceQuantum of work, not per step: a step can
		// take microseconds, and a timer per step would cost more than
		// it saves.
		if now := time.Now(); now.Sub(rested) >= paceQuantum {
			rested = now
			return pacer.Rest(ctx)
		}
		return nil
	}
}

// paceQuantum is the least work between two rests of a heavy read.
const paceQuantum = 10 * time.Millisecond

// stopped answers a computation stopped by its request's context: the
// client left (nobody reads the answer) or the deadline passed. 503, as
// a retry may succeed.
func stopped(err error) error {
	return &httpError{status: http.StatusServiceUnavailable, cause: err,
		errs: []api.FieldError{{Message: "the request ended before its answer was computed; retry"}}}
}

// heavyError maps what stops a heavy computation to its answer; other
// errors are returned as they are.
func (s *Server) heavyError(err error) error {
	lim := s.heavy().lim
	var he *httpError
	switch {
	case err == nil || errors.As(err, &he):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return stopped(err)
	case errors.Is(err, eta.ErrBudget):
		return &httpError{status: http.StatusServiceUnavailable, cause: err, errs: []api.FieldError{{Message: fmt.Sprintf(
			"the estimates asked for need more simulation than one request may run (--heavy-read-eta-work %d, in steps times pending workloads); retry: while the log does not change, the next request goes on from where this one stopped", lim.ETAWork)}}}
	case errors.Is(err, whatif.ErrBudget):
		return &httpError{status: http.StatusServiceUnavailable, cause: err, errs: []api.FieldError{{Message: fmt.Sprintf(
			"the what-if needs more than %d simulated steps (--heavy-read-whatif-steps); ask for a shorter window", lim.WhatIfSteps)}}}
	}
	return err
}
