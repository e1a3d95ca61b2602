package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestChaosCluster is the suite on a clustered JetStream: three
// nats-server processes (built from the e2e module, as Build builds
// them) in one cluster on loopback with the shipped accounts, every
// stream and bucket at R3, the five services (two admission, two ingest
// instances) given all three URLs, under the steady load. Faults strike
// the NATS cluster: JQ_EVENTS' leader SIGKILLed, a follower SIGKILLed, a
// server SIGSTOPped for 30 s, a leader stepdown, two of three servers
// SIGKILLed for 20 s (quorum lost), all three restarted; and the
// single-server suite's process faults.
//
// Afterwards: the whole-log checks of TestChaos (Check), and every answer
// the load's client got accounted for (Account): each 2xx submission is
// in the log once, each other answer was a 503, 504 or no answer that the
// client retried, with the same Idempotency-Key, to a 2xx; a refusal a
// valid request must not get counts against the run. Per fault it prints
// the seconds until the next admission the log holds.
//
// The short run (the default, part of `make e2e`) strikes two faults,
// JQ_EVENTS' leader killed and a stepdown, and asserts correctness only;
// `make chaos-cluster` (CHAOS_CLUSTER=long, CHAOS_DURATION=5m) strikes
// every fault and asserts recovery within 10 s of each single-server
// fault, and of the servers' return after quorum loss and a full restart.
//
//	cd e2e && go test -count=1 -v -run TestChaosCluster ./chaos
//	CHAOS_CLUSTER=long CHAOS_DURATION=5m CHAOS_SEED=42 go test -count=1 -v -run TestChaosCluster -timeout 60m ./chaos
func TestChaosCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the clustered fault-injection suite runs for minutes")
	}
	o := readOptions(t)
	long := os.Getenv("CHAOS_CLUSTER") == "long"
	t.Logf("chaos-cluster: seed=%d duration=%s rate=%g/s long=%t faults=%t (CHAOS_SEED=%d reruns this schedule)",
		o.seed, o.duration, o.rate, long, !o.noFaults, o.seed)
	rng := rand.New(rand.NewPCG(o.seed, 0))

	// Every wait below is bounded by ctx, which ends before go test's
	// own timeout would panic, so that the cleanups still kill every
	// process the suite started.
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+15*time.Minute)
	defer cancel()
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		defer cancel()
	}

	logDir, err := os.MkdirTemp("", "jq-chaos-cluster-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(logDir)
		} else {
			t.Logf("chaos-cluster: logs kept in %s", logDir)
		}
	})
	bin := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := Build(ctx, filepath.Dir(wd), bin); err != nil {
		t.Fatal(err)
	}

	c, nc, err := startReplicated(bin, logDir, natsStore(t))
	t.Cleanup(func() {
		c.close()
		if nc != nil {
			for _, n := range nc.nodes {
				if n.proc != nil {
					n.proc.stop(syscall.SIGKILL)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	procs := c.all()
	for _, n := range nc.nodes {
		procs = append(procs, n.proc)
	}
	defer func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("--- tail of %s (%s):\n%s", p.name, p.logPath, p.tail(25))
			}
		}
	}()
	conn, err := nc.connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}

	setupYAML, cqs := setup(2, 3)
	l := newLoad(c.ingestURLs, cqs, o.seed, o.rate)
	lg := &ledger{}
	if err := l.applySetup(ctx, setupYAML); err != nil {
		t.Fatal(err)
	}
	// Only the load's answers are accounted for: the setup's retries
	// while the services start are not the faults'.
	l.onAnswer = lg.hear
	if err := assertReplicated(ctx, js, l); err != nil {
		// A finding, not a reason to stop: the faults still show what an
		// unreplicated stream or bucket costs.
		t.Errorf("chaos-cluster: %v", err)
	}
	for _, line := range mustReplicas(ctx, js) {
		t.Logf("chaos-cluster: %s", line)
	}

	in := &clusterInjector{nats: nc, conn: conn, injector: &injector{c: c, js: js, rng: rng, kills: map[string]int{},
		log: func(f string, a ...any) { t.Logf(f, a...) }}}
	kinds := clusterPlan(rng, long)
	if o.noFaults {
		kinds = nil
	}
	t.Logf("chaos-cluster: faults, in order: %s", strings.Join(kinds, ", "))
	report, log := runCluster(ctx, t, c, js, l, in, kinds, o)

	// A service that starts again during a fault declares its buckets
	// again: they must still be at R3 once it is over.
	if lines, err := checkReplicas(ctx, js, clusterReplicas); err != nil {
		t.Errorf("chaos-cluster: after the faults: %v", err)
	} else {
		t.Logf("chaos-cluster: after the faults, replicated: %s", strings.Join(lines, ", "))
	}

	acc := Account(lg.all())
	recs := recoveries(in.faults(), log)
	summary := fmt.Sprintf("chaos-cluster: seed=%d submitted=%d faults=%s %s %s", o.seed, report.Submitted, faultCounts(in, kinds), report.Counts(), acc.Summary())
	t.Log(summary)
	fmt.Println(summary)
	answers := lg.all()
	for _, r := range recs {
		line := fmt.Sprintf("chaos-cluster: fault %s; non-2xx meanwhile: %s", r, during(r, answers))
		t.Log(line)
		fmt.Println(line)
	}
	t.Logf("chaos-cluster: %d retries, %d finishes, %d priority changes; admission takeovers: %s",
		l.stats.retries.Load(), l.stats.finishes.Load(), l.stats.priorities.Load(), strings.Join(in.takeovers, "; "))

	for _, p := range procs {
		if n := p.selfExits(); n > 0 {
			t.Errorf("chaos-cluster: %s exited %d times by itself (restarted): %s", p.name, n, strings.Join(p.grep(3, "=== chaos", "exited"), " | "))
		}
	}
	for _, f := range in.failures {
		t.Errorf("chaos-cluster: fault: %s", f)
	}
	for _, k := range kinds {
		if (k == faultLeader && len(in.takeovers) == 0) || (k != faultLeader && in.kills[k] == 0) {
			t.Errorf("chaos-cluster: %s never struck", k)
		}
	}
	if report.Bad() {
		t.Errorf("chaos-cluster: invariants broken (seed %d):\n%s", o.seed, report.Offenders(8))
	}
	reportAnswers(t, acc, c)
	if long {
		for _, r := range recs {
			if r.bounded && (!r.seen || r.next > recoveryBound) {
				t.Errorf("chaos-cluster: recovery over %s: %s", recoveryBound, r)
			}
		}
	}
}

// startReplicated starts the NATS cluster, PostgreSQL and the services
// (two ingest, two admission, one of each other), every service on all
// three servers as its own shipped user and at --stream-replicas 3.
func startReplicated(bin, logDir, store string) (*cluster, *natsCluster, error) {
	c := &cluster{bin: bin, logDir: logDir, services: map[string][]*proc{}, replicas: clusterReplicas}
	nc, err := startNATSCluster(bin, store, logDir)
	if err != nil {
		return c, nc, err
	}
	c.natsURLs, c.natsEnv = nc.URLs(), nc.env
	if c.pg, err = startPostgres(logDir); err != nil {
		return c, nc, err
	}
	return c, nc, c.startServices(map[string]int{"ingest": 2, "admission": 2, "preemptor": 1, "podsready": 1, "scorer": 1})
}

// assertReplicated waits until every service has processed the setup
// (so each has declared what it declares) and then until JQ_EVENTS,
// JQ_SUBMIT and every bucket report three replicas, a leader and two
// followers; a follower still joining gets 30 s.
func assertReplicated(ctx context.Context, js jetstream.JetStream, l *load) error {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := l.sync(sctx); err != nil {
		return fmt.Errorf("the services did not settle after the setup: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := checkReplicas(ctx, js, clusterReplicas)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("streams and buckets at R%d: %w", clusterReplicas, err)
		}
		time.Sleep(time.Second)
	}
}

func mustReplicas(ctx context.Context, js jetstream.JetStream) []string {
	lines, err := checkReplicas(ctx, js, clusterReplicas)
	if err != nil {
		lines = append(lines, err.Error())
	}
	return []string{"replicated: " + strings.Join(lines, ", ")}
}

// runCluster drives the load while the faults strike one after another;
// the load goes on for the duration or until the last fault is over and
// the quiet gap after it has passed, whichever is later. Then the system
// settles and the log is checked.
func runCluster(ctx context.Context, t *testing.T, c *cluster, js jetstream.JetStream, l *load, in *clusterInjector, kinds []string, o options) (Report, []Record) {
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	drain, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		in.run(ctx, kinds)
		if len(kinds) > 0 {
			// The last fault's recovery must show in the log.
			time.Sleep(recoveryBound + 5*time.Second)
		}
	}()
	go func() {
		select {
		case <-time.After(o.duration):
		case <-ctx.Done():
		}
		select {
		case <-faultsDone:
		case <-ctx.Done():
		}
		stopLoad()
	}()
	go l.watch(loadCtx, loadCtx, js)
	go l.priorityLoop(loadCtx)
	start := time.Now()
	l.submitLoop(loadCtx, drain)
	t.Logf("chaos-cluster: load stopped after %s; %d submissions sent", time.Since(start).Round(time.Second), l.next.Load())
	waitGroup(&l.submissions, time.Minute, stopDrain)
	l.finishes.Wait()

	settle, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := l.sync(settle); err != nil {
		t.Errorf("chaos-cluster: the system did not settle within 2m (%v); %s", err, growth(ctx, js))
	}
	t.Logf("chaos-cluster: positions: %s", c.positions(ctx, js))
	log, err := readReplicatedLog(ctx, js)
	if err != nil {
		// The answers and the faults are still worth a report.
		t.Errorf("chaos-cluster: read the log: %v; no log check, no recovery figures", err)
		return Report{}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	projection, err := l.projection(pctx)
	if err != nil {
		t.Errorf("chaos-cluster: read the projection: %v", err)
	}
	t.Logf("chaos-cluster: the log holds %d events: %s", len(log), typeCounts(log))
	t.Cleanup(func() {
		if t.Failed() {
			dumpLog(t, filepath.Join(c.logDir, "events.jsonl"), log)
		}
	})
	return Check(log, l.outcomes(), projection), log
}

// faultCounts renders how often each planned kind struck.
func faultCounts(in *clusterInjector, kinds []string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var parts []string
	for _, k := range slices.Compact(slices.Sorted(slices.Values(kinds))) {
		n := in.kills[k]
		if k == faultLeader {
			n = len(in.takeovers)
		}
		parts = append(parts, fmt.Sprintf("%s:%d", k, n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// reportAnswers fails the run for every answer a valid request must not
// get, each with the ingest log lines of its request id, and for every
// submission a client would still be waiting on.
func reportAnswers(t *testing.T, acc Accounting, c *cluster) {
	for i, a := range acc.NotClientsFault {
		if i == 10 {
			t.Errorf("chaos-cluster: … and %d more refusals not the client's fault", len(acc.NotClientsFault)-i)
			break
		}
		var lines []string
		if id := a.requestID(); id != "" {
			for _, p := range c.services["ingest"] {
				lines = append(lines, p.grep(3, id)...)
			}
		}
		t.Errorf("chaos-cluster: refusal not the client's fault: %s\n  ingest: %s", a, strings.Join(lines, "\n  ingest: "))
	}
	for i, a := range acc.Unresolved {
		if i == 10 {
			t.Errorf("chaos-cluster: … and %d more unresolved submissions", len(acc.Unresolved)-i)
			break
		}
		t.Errorf("chaos-cluster: submission never answered 2xx or 4xx before the load gave up: %s", a)
	}
}
