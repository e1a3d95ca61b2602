package snapshot

import (
	"context"
	"time"
)

// CompactionShare is the share of one core's time a compaction may take
// while the service it runs in keeps deciding (see Pacer). With the
// services as processes on 2 cores at 1,000 workloads/s, p99
// submit→QuotaReserved over 60 s was 78-97 ms unpaced, 43-48 ms at a
// quarter and 29-33 ms at a tenth. Paced, a compaction there took 14 s
// and then 23 s, more than the 17 s in which 50,000 events came: the
// next one starts when the last ends, so under such a load snapshots
// come less often than the policy says, at a tenth of a core.
const CompactionShare = 0.1

// Pacer keeps background work to a share of the time, the way
// PostgreSQL's cost-based vacuum delay keeps vacuum off the hot path:
// work runs in pieces, and Rest, called between two pieces, sleeps so
// that the pieces take at most Share of the wall time. A compaction at
// full speed takes a whole core for seconds, and on a busy machine the
// events decided meanwhile wait for a core: measured, p99
// submit→QuotaReserved over a minute was four times what it was with
// snapshots off.
//
// A piece is timed by the wall clock, so on a machine where the work
// waits for a core it rests longer, not shorter.
type Pacer struct {
	// Share is in (0, 1); any other value never rests.
	Share float64
	// Sleep waits for d or until ctx is done; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Slept is the time Rest has slept so far (a sleep a done context
	// cut short is not counted).
	Slept time.Duration

	since time.Time
}

// Rest ends the piece of work that began at the last Rest (or the first
// call, which only starts the count) with a sleep in proportion to it.
func (p *Pacer) Rest(ctx context.Context) error {
	now := p.now()
	busy := now.Sub(p.since)
	first := p.since.IsZero()
	p.since = now
	if first || p.Share <= 0 || p.Share >= 1 || busy <= 0 {
		return ctx.Err()
	}
	d := time.Duration(float64(busy) * (1 - p.Share) / p.Share)
	if err := p.sleep(ctx, d); err != nil {
		return err
	}
	p.Slept += d
	p.since = p.now()
	return nil
}

func (p *Pacer) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Pacer) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
