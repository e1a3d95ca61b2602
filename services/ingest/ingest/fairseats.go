package ingest

import (
	"context"
	"slices"
	"sync"
)

// fairSeats hands a fixed number of seats to the heavy reads of many
// callers. A first-come queue would let one caller who keeps a read
// waiting at all times take every other seat too: another caller would
// wait behind all of them. Here, when a seat frees, it goes to the caller
// with the fewest seats held, and among those to the one served longest
// ago (a caller never served first), as the API server's fair queuing
// dispatches from the least served flow: a caller arriving while another
// is busy waits for one read to end, not for that caller's backlog.
type fairSeats struct {
	mu    sync.Mutex
	free  int
	grant uint64 // counts grants: a flow's served is the count at its last
	flows map[string]*flow
	// waiting counts every flow's waiters: a seat goes to no one new
	// while someone waits.
	waiting int
}

// flow is one caller's seats held and reads waiting.
type flow struct {
	held   int
	queue  []*seatWaiter
	served uint64
}

type seatWaiter struct {
	ready   chan struct{}
	granted bool
}

func newFairSeats(n int) *fairSeats {
	return &fairSeats{free: n, flows: map[string]*flow{}}
}

// acquire takes a seat for caller, waiting its turn until ctx ends.
func (f *fairSeats) acquire(ctx context.Context, caller string) error {
	f.mu.Lock()
	fl := f.flow(caller)
	if f.free > 0 && f.waiting == 0 {
		f.take(fl)
		f.mu.Unlock()
		return nil
	}
	w := &seatWaiter{ready: make(chan struct{})}
	fl.queue = append(fl.queue, w)
	f.waiting++
	f.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	if w.granted {
		// Granted as ctx ended: give it on.
		f.mu.Unlock()
		f.release(caller, 1)
		return ctx.Err()
	}
	fl.queue = slices.DeleteFunc(fl.queue, func(x *seatWaiter) bool { return x == w })
	f.waiting--
	f.forget(caller, fl)
	f.mu.Unlock()
	return ctx.Err()
}

// tryExtra takes up to n seats that nobody waits for, counted as
// caller's (a computation that can use more than one core).
func (f *fairSeats) tryExtra(caller string, n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting > 0 {
		return 0
	}
	got := min(n, f.free)
	fl := f.flow(caller)
	for range got {
		f.take(fl)
	}
	f.forget(caller, fl)
	return got
}

// release gives back n of caller's seats and hands them on.
func (f *fairSeats) release(caller string, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.flow(caller)
	fl.held -= n
	f.free += n
	f.forget(caller, fl)
	for f.free > 0 && f.waiting > 0 {
		next := f.next()
		w := next.queue[0]
		next.queue = next.queue[1:]
		f.waiting--
		w.granted = true
		f.take(next)
		close(w.ready)
	}
}

// next is the flow a freed seat goes to: of those waiting, the fewest
// seats held, then the longest since served.
func (f *fairSeats) next() *flow {
	var best *flow
	for _, fl := range f.flows {
		if len(fl.queue) == 0 {
			continue
		}
		if best == nil || fl.held < best.held || fl.held == best.held && fl.served < best.served {
			best = fl
		}
	}
	return best
}

func (f *fairSeats) take(fl *flow) {
	f.free--
	fl.held++
	f.grant++
	fl.served = f.grant
}

func (f *fairSeats) flow(caller string) *flow {
	fl := f.flows[caller]
	if fl == nil {
		fl = &flow{}
		f.flows[caller] = fl
	}
	return fl
}

// forget drops a flow that holds and waits for nothing: a caller back
// after its reads ended counts as never served, as it has no backlog.
func (f *fairSeats) forget(caller string, fl *flow) {
	if fl.held == 0 && len(fl.queue) == 0 {
		delete(f.flows, caller)
	}
}
