package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Fault kinds beyond a service's name (a SIGKILL of one of its instances).
const (
	faultLeader   = "admission-leader"
	faultPostgres = "postgres"
	faultNATS     = "nats"
)

// plan is the seeded schedule of faults: each round holds one SIGKILL
// of every service, one of the admission leader, one hard stop of
// PostgreSQL and one of NATS, shuffled; the run is cut into one slot per
// fault, and each fault strikes at a random moment of its slot.
type fault struct {
	at   time.Duration
	kind string
}

func plan(rng *rand.Rand, duration time.Duration, rounds int) []fault {
	var kinds []string
	for range rounds {
		kinds = append(kinds, Services...)
		kinds = append(kinds, faultLeader, faultPostgres, faultNATS)
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	slot := duration / time.Duration(len(kinds))
	out := make([]fault, len(kinds))
	for i, k := range kinds {
		// In the first half of the slot, so that the fault and its
		// restart are over before the next one.
		out[i] = fault{at: time.Duration(i)*slot + time.Duration(rng.Int64N(int64(slot/2))), kind: k}
	}
	return out
}

// injector carries out a plan.
type injector struct {
	c   *cluster
	js  jetstream.JetStream
	rng *rand.Rand
	log func(format string, args ...any)

	mu    sync.Mutex
	kills map[string]int
	// takeovers are the admission leader kills and who took over after
	// how long; failures are faults that did not go as they must.
	takeovers, failures []string
}

func (in *injector) run(ctx context.Context, faults []fault) {
	start := time.Now()
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.at))):
		}
		if err := in.strike(ctx, f.kind); err != nil {
			in.fail("%s at %s: %v", f.kind, time.Since(start).Round(time.Millisecond), err)
		}
	}
}

func (in *injector) fail(format string, args ...any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failures = append(in.failures, fmt.Sprintf(format, args...))
}

func (in *injector) count(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.kills[kind]++
}

// pause is how long a killed process stays down.
func (in *injector) pause(from, to time.Duration) time.Duration {
	return from + time.Duration(in.rng.Int64N(int64(to-from)))
}

func (in *injector) strike(ctx context.Context, kind string) error {
	switch kind {
	case faultLeader:
		return in.killLeader(ctx)
	case faultPostgres:
		if !in.c.pg.kill() {
			return fmt.Errorf("postmaster not running")
		}
		in.count(faultPostgres)
		in.log("chaos: SIGKILL postgres (postmaster)")
		time.Sleep(in.pause(2*time.Second, 6*time.Second))
		return in.c.pg.restart()
	case faultNATS:
		if !in.c.nats.kill() {
			return fmt.Errorf("nats-server not running")
		}
		in.count(faultNATS)
		in.log("chaos: SIGKILL nats-server")
		time.Sleep(in.pause(time.Second, 4*time.Second))
		return in.c.nats.restart()
	}
	ps := in.c.services[kind]
	p := ps[in.rng.IntN(len(ps))]
	return in.killAndRestart(kind, p, in.pause(200*time.Millisecond, 3*time.Second))
}

func (in *injector) killAndRestart(kind string, p *proc, down time.Duration) error {
	if !p.kill() {
		return fmt.Errorf("%s not running", p.name)
	}
	in.count(kind)
	in.log("chaos: SIGKILL %s, down for %s", p.name, down.Round(time.Millisecond))
	time.Sleep(down)
	return p.start()
}

// killLeader kills the instance that holds admission's lease, without a
// chance to release it, and waits for the standby to take the lease over
// once its TTL lapses; only then does the killed one start again (as a
// new incarnation, so it cannot simply take its own lease back).
func (in *injector) killLeader(ctx context.Context) error {
	var leader *proc
	var holder string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if leader, holder, err = in.c.admissionLeader(ctx, in.js); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("find the leader: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	killed := time.Now()
	if !leader.kill() {
		return fmt.Errorf("leader %s exited before the kill", holder)
	}
	in.count("admission")
	in.log("chaos: SIGKILL admission leader %s", holder)
	defer func() { _ = leader.start() }()
	deadline = time.Now().Add(10*leaseTTL + 20*time.Second)
	for time.Now().Before(deadline) {
		if _, now, err := in.c.admissionLeader(ctx, in.js); err == nil && now != holder {
			took := time.Since(killed).Round(10 * time.Millisecond)
			in.mu.Lock()
			in.takeovers = append(in.takeovers, fmt.Sprintf("%s -> %s after %s", holder, now, took))
			in.mu.Unlock()
			in.log("chaos: %s took the admission lease over after %s", now, took)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no standby took the admission lease over from %s", holder)
}

// summary renders the kill counts in the summary line's order.
func (in *injector) summary() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var parts []string
	for _, k := range append(append([]string{}, Services...), faultPostgres, faultNATS) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, in.kills[k]))
	}
	return strings.Join(parts, ",")
}
