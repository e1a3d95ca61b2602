package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/events"
)

// The NATS cluster's faults.
const (
	// faultStreamLeader: SIGKILL the server leading JQ_EVENTS.
	faultStreamLeader = "nats-stream-leader"
	// faultFollower: SIGKILL a server that does not lead JQ_EVENTS.
	faultFollower = "nats-follower"
	// faultSigstop: SIGSTOP a server for sigstopFor, then SIGCONT: its
	// sockets stay open and it answers nothing.
	faultSigstop = "nats-sigstop"
	// faultStepdown: JQ_EVENTS' leader hands over, through the API.
	faultStepdown = "nats-stepdown"
	// faultQuorum: SIGKILL two of the three servers for quorumLostFor:
	// no stream can write, and nothing acknowledged may be lost.
	faultQuorum = "nats-quorum"
	// faultRestartAll: SIGKILL all three servers, start them again.
	faultRestartAll = "nats-restart-all"
)

// clusterFaults are the NATS faults of one long round, in no order.
var clusterFaults = []string{faultStreamLeader, faultFollower, faultSigstop, faultStepdown, faultQuorum, faultRestartAll}

const (
	sigstopFor    = 30 * time.Second
	quorumLostFor = 20 * time.Second
	// recoveryBound is the longest a NATS fault may keep admission
	// stalled in the long run: counted from the fault for one server,
	// from the servers' return for quorum loss and a full restart.
	recoveryBound = 10 * time.Second
)

// struck is one fault as it happened.
type struck struct {
	kind, what string
	// at is when it struck; from is when recovery is counted from (at,
	// or the moment quorum came back); until is when it was over
	// (servers and processes back, or the stepdown done).
	at, from, until time.Time
	// bounded: the long run asserts recovery within recoveryBound (every
	// NATS fault; a process fault's recovery is the process's own).
	bounded bool
	err     error
}

// clusterInjector carries out the faults of a clustered run one after
// another, with a quiet gap between them so that each one's recovery is
// its own: the gap is longer than recoveryBound.
type clusterInjector struct {
	*injector
	nats *natsCluster
	conn *nats.Conn

	smu    sync.Mutex
	struck []struck
}

// clusterPlan is the schedule: in the short run (long false) JQ_EVENTS'
// leader killed and a stepdown; in the long run every NATS fault and
// every process fault (each service, the admission leader, PostgreSQL),
// shuffled.
func clusterPlan(rng *rand.Rand, long bool) []string {
	kinds := []string{faultStreamLeader, faultStepdown}
	if long {
		kinds = append(slices.Clone(clusterFaults), Services...)
		kinds = append(kinds, faultLeader, faultPostgres)
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// run strikes each fault after a seeded gap of 12-20 s from the end of
// the one before (the first after 10-15 s of load), until ctx ends.
func (ci *clusterInjector) run(ctx context.Context, kinds []string) {
	gap := ci.pause(10*time.Second, 15*time.Second)
	for _, kind := range kinds {
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		s := ci.strikeCluster(ctx, kind)
		if s.err != nil {
			ci.fail("%s at %s: %v", kind, s.at.Format("15:04:05.000"), s.err)
		}
		ci.smu.Lock()
		ci.struck = append(ci.struck, s)
		ci.smu.Unlock()
		gap = ci.pause(12*time.Second, 20*time.Second)
	}
}

func (ci *clusterInjector) faults() []struck {
	ci.smu.Lock()
	defer ci.smu.Unlock()
	return slices.Clone(ci.struck)
}

func (ci *clusterInjector) strikeCluster(ctx context.Context, kind string) (s struck) {
	s = struck{kind: kind, at: time.Now()}
	s.from = s.at
	defer func() { s.until = time.Now() }()
	switch kind {
	case faultStreamLeader, faultFollower:
		s.bounded = true
		n, err := ci.pick(ctx, kind == faultStreamLeader)
		if err != nil {
			s.err = err
			return s
		}
		s.at, s.from = time.Now(), time.Now()
		s.what, s.err = ci.killNodes(kind, []*natsNode{n}, ci.pause(2*time.Second, 5*time.Second))
	case faultSigstop:
		s.bounded = true
		n := ci.nats.nodes[ci.rng.IntN(len(ci.nats.nodes))]
		leader, _ := ci.nats.streamLeader(ctx, ci.js, events.Stream)
		s.at, s.from = time.Now(), time.Now()
		if s.err = n.freeze(); s.err != nil {
			return s
		}
		ci.count(kind)
		s.what = fmt.Sprintf("SIGSTOP %s (JQ_EVENTS leader %s) for %s", n.name, nameOf(leader), sigstopFor)
		ci.log("chaos: %s", s.what)
		time.Sleep(sigstopFor)
		s.err = n.thaw()
	case faultStepdown:
		s.bounded = true
		from, to, err := ci.nats.stepDown(ctx, ci.conn, ci.js)
		s.what, s.err = fmt.Sprintf("JQ_EVENTS leader stepdown %s -> %s", from, to), err
		if err == nil {
			ci.count(kind)
		}
		ci.log("chaos: %s", s.what)
	case faultQuorum:
		s.bounded = true
		ns := slices.Clone(ci.nats.nodes)
		ci.rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
		s.what, s.err = ci.killNodes(kind, ns[:2], quorumLostFor)
		s.from = time.Now()
	case faultRestartAll:
		s.bounded = true
		s.what, s.err = ci.killNodes(kind, ci.nats.nodes, ci.pause(time.Second, 3*time.Second))
		s.from = time.Now()
	default:
		// The single-server suite's process faults; recovery is reported,
		// not bounded (a service's own restart is not the NATS cluster's).
		s.what = kind
		s.err = ci.strike(ctx, kind)
	}
	return s
}

// pick finds JQ_EVENTS' leader, or a server that does not lead it.
func (ci *clusterInjector) pick(ctx context.Context, leader bool) (*natsNode, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := ci.nats.streamLeader(ctx, ci.js, events.Stream)
		if err == nil {
			if leader {
				return l, nil
			}
			var others []*natsNode
			for _, n := range ci.nats.nodes {
				if n != l {
					others = append(others, n)
				}
			}
			return others[ci.rng.IntN(len(others))], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("find JQ_EVENTS' leader: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killNodes SIGKILLs the servers, keeps them down, and starts them again
// together.
func (ci *clusterInjector) killNodes(kind string, ns []*natsNode, down time.Duration) (string, error) {
	leader, _ := ci.nats.streamLeader(context.Background(), ci.js, events.Stream)
	for _, n := range ns {
		if !n.kill() {
			return "", fmt.Errorf("%s not running", n.name)
		}
	}
	ci.count(kind)
	what := fmt.Sprintf("SIGKILL %s (JQ_EVENTS leader %s), down for %s", nodeNames(ns), nameOf(leader), down.Round(time.Millisecond))
	ci.log("chaos: %s", what)
	time.Sleep(down)
	for _, n := range ns {
		if err := n.start(); err != nil {
			return what, err
		}
	}
	for _, n := range ns {
		if err := ci.nats.ready(n, time.Minute); err != nil {
			return what, err
		}
	}
	return what, nil
}

func nameOf(n *natsNode) string {
	if n == nil {
		return "unknown"
	}
	return n.name
}

// recovery is one fault's figure: the time from its from to the first
// admission (QuotaReserved) JetStream stored after it.
type recovery struct {
	struck
	next time.Duration
	seen bool
}

// recoveries reads each fault's recovery from the log.
func recoveries(faults []struck, log []Record) []recovery {
	var admitted []time.Time
	for _, r := range log {
		if r.Event.Type == events.QuotaReserved {
			admitted = append(admitted, r.Stored)
		}
	}
	out := make([]recovery, len(faults))
	for i, f := range faults {
		out[i].struck = f
		j, _ := slices.BinarySearchFunc(admitted, f.from, func(a, t time.Time) int { return a.Compare(t) })
		for ; j < len(admitted); j++ {
			if admitted[j].After(f.from) {
				out[i].next, out[i].seen = admitted[j].Sub(f.from), true
				break
			}
		}
	}
	return out
}

// during counts the answers of one kind of request, by status, that the
// client got between a fault and its recovery (or 10 s after it was over,
// when no admission followed).
func during(r recovery, answers []answer) string {
	end := r.until.Add(recoveryBound)
	if r.seen {
		end = r.from.Add(r.next)
	}
	n := map[string]int{}
	for _, a := range answers {
		if a.at.Before(r.at) || a.at.After(end) || (a.status >= 200 && a.status < 300) {
			continue
		}
		st := fmt.Sprint(a.status)
		if a.status == 0 {
			st = "timeout"
		}
		n[requestKind(a)+" "+st]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (r recovery) String() string {
	next := "no admission after it"
	if r.seen {
		next = fmt.Sprintf("next admission after %.2fs", r.next.Seconds())
	}
	from := "the fault"
	if r.from.Sub(r.at) > time.Second {
		from = "the servers' return"
	}
	return fmt.Sprintf("%-18s %s at %s, over after %.1fs: %s from %s", r.kind, r.what, r.at.Format("15:04:05.000"),
		r.until.Sub(r.at).Seconds(), next, from)
}

// signalNoWait signals the running incarnation and returns at once, under
// the lock, so the pid cannot have been reaped and reused meanwhile.
func (p *proc) signalNoWait(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return fmt.Errorf("%s not running", p.name)
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}
