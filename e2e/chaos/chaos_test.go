package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// options are the run's knobs: CHAOS_SEED (default: the time),
// CHAOS_DURATION of the load (default 75s; `make chaos` runs 10m),
// CHAOS_RATE, submissions per second (default 12, modest on a shared
// machine), and CHAOS_FAULTS=off, the same load with no fault, to tell
// whether a finding needs the faults.
type options struct {
	seed     uint64
	duration time.Duration
	rate     float64
	noFaults bool
}

func readOptions(t *testing.T) options {
	o := options{seed: uint64(time.Now().UnixNano()), duration: 75 * time.Second, rate: 12}
	o.noFaults = os.Getenv("CHAOS_FAULTS") == "off"
	var err error
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		if o.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		if o.duration, err = time.ParseDuration(v); err != nil || o.duration < 30*time.Second {
			t.Fatalf("CHAOS_DURATION %q: want a duration of at least 30s", v)
		}
	}
	if v := os.Getenv("CHAOS_RATE"); v != "" {
		if o.rate, err = strconv.ParseFloat(v, 64); err != nil || o.rate <= 0 {
			t.Fatalf("CHAOS_RATE %q: want a positive number", v)
		}
	}
	return o
}

// TestChaos runs jetqueue's five services as processes under load while
// killing each of them, the admission leader, PostgreSQL and NATS, then
// checks the whole log (see the package comment).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault-injection suite runs for minutes")
	}
	o := readOptions(t)
	t.Logf("chaos: seed=%d duration=%s rate=%g/s faults=%t (CHAOS_SEED=%d reruns this schedule)", o.seed, o.duration, o.rate, !o.noFaults, o.seed)
	rng := rand.New(rand.NewPCG(o.seed, 0))

	// Logs outlive a failed run; a passed one removes them.
	logDir, err := os.MkdirTemp("", "jq-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(logDir)
		} else {
			t.Logf("chaos: logs kept in %s", logDir)
		}
	})
	bin := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := Build(bctx, filepath.Dir(wd), bin); err != nil {
		t.Fatal(err)
	}

	c, err := startCluster(bin, logDir, natsStore(t))
	t.Cleanup(c.close)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, p := range c.all() {
				t.Logf("--- tail of %s (%s):\n%s", p.name, p.logPath, p.tail(25))
			}
		}
	}()
	nc, err := nats.Connect(c.nats.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	setupYAML, cqs := setup(2, 3)
	l := newLoad(c.ingestURLs, cqs, o.seed, o.rate)
	ctx, stop := context.WithTimeout(context.Background(), o.duration+8*time.Minute)
	defer stop()
	if err := l.applySetup(ctx, setupYAML); err != nil {
		t.Fatal(err)
	}
	report, in := run(ctx, t, c, js, l, rng, o)

	kills := in.summary()
	summary := fmt.Sprintf("chaos: seed=%d submitted=%d kills=%s %s", o.seed, report.Submitted, kills, report.Counts())
	t.Log(summary)
	fmt.Println(summary)
	t.Logf("chaos: %d retries, %d finishes, %d priority changes; admission takeovers: %s",
		l.stats.retries.Load(), l.stats.finishes.Load(), l.stats.priorities.Load(), strings.Join(in.takeovers, "; "))
	for _, p := range c.all() {
		if n := p.selfExits(); n > 0 {
			// A service rides out faults (NATS or PostgreSQL restarting)
			// by starting its main again in the process; exiting is a bug.
			t.Errorf("chaos: %s exited %d times by itself (restarted): %s", p.name, n, strings.Join(p.grep(3, "=== chaos", "exited"), " | "))
		}
	}
	for _, r := range l.refusals {
		t.Logf("chaos: submission refused: %s", r)
	}
	for _, f := range in.failures {
		t.Errorf("chaos: fault: %s", f)
	}
	for _, k := range append(append([]string{}, Services...), faultPostgres, faultNATS) {
		if in.kills[k] == 0 && !o.noFaults {
			t.Errorf("chaos: %s was never killed", k)
		}
	}
	if len(in.takeovers) == 0 && !o.noFaults {
		t.Errorf("chaos: no admission leader kill was taken over")
	}
	if report.Bad() {
		t.Errorf("chaos: invariants broken (seed %d):\n%s", o.seed, report.Offenders(8))
	}
}

// run drives the load and the faults for the duration, lets the system
// settle, and checks the log.
func run(ctx context.Context, t *testing.T, c *cluster, js jetstream.JetStream, l *load, rng *rand.Rand, o options) (Report, *injector) {
	in := &injector{c: c, js: js, rng: rng, kills: map[string]int{}, log: func(f string, a ...any) { t.Logf(f, a...) }}
	rounds := max(1, int(o.duration/(75*time.Second)))
	faults := plan(rng, o.duration, rounds)
	if o.noFaults {
		faults = nil
	}

	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	// Submissions still unanswered and finishes still due when the load
	// stops get a minute to land.
	drain, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	go l.watch(loadCtx, loadCtx, js)
	go l.priorityLoop(loadCtx)
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); in.run(loadCtx, faults) }()
	l.submitLoop(loadCtx, drain)
	<-faultsDone
	t.Logf("chaos: load stopped after %s; %d submissions sent", o.duration, l.next.Load())
	waitGroup(&l.submissions, time.Minute, stopDrain)
	l.finishes.Wait()

	settle, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := l.sync(settle); err != nil {
		// Check the log all the same, but say that its end is a moment
		// of a system still moving: stuck and projection figures are
		// then a snapshot, not a verdict.
		t.Errorf("chaos: the system did not settle within 2m (%v); %s", err, growth(ctx, js))
	}
	t.Logf("chaos: positions: %s", c.positions(ctx, js))
	log, err := ReadLog(ctx, js)
	if err != nil {
		t.Fatalf("chaos: read the log: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	projection, err := l.projection(pctx)
	if err != nil {
		t.Errorf("chaos: read the projection: %v", err)
	}
	t.Logf("chaos: the log holds %d events: %s", len(log), typeCounts(log))
	t.Cleanup(func() {
		if t.Failed() {
			dumpLog(t, filepath.Join(c.logDir, "events.jsonl"), log)
		}
	})
	return Check(log, l.outcomes(), projection), in
}

// waitGroup waits for wg, cancelling what it waits for after within.
func waitGroup(wg interface{ Wait() }, within time.Duration, cancel func()) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		cancel()
		<-done
	}
}

// natsStore keeps JetStream's files in memory where the machine allows:
// a SIGKILL loses nothing written there, and no fsync waits on a disk
// shared with every other test.
func natsStore(t testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "jq-chaos-nats-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// typeCounts says how much of each kind of event the log holds, so that
// a reader sees the preemptions were in play.
func typeCounts(log []Record) string {
	n := map[string]int{}
	for _, r := range log {
		n[shortType(r.Event.Type)]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// growth measures how much the log grows over 5 s once the load is over.
func growth(ctx context.Context, js jetstream.JetStream) string {
	last := func() uint64 {
		s, err := js.Stream(ctx, events.Stream)
		if err != nil {
			return 0
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0
		}
		return info.State.LastSeq
	}
	a := last()
	time.Sleep(5 * time.Second)
	b := last()
	return fmt.Sprintf("with no load, the log grew from seq %d to %d in 5s", a, b)
}

// dumpLog writes the log as JSON lines (seq, type, subject, data) for a
// reader of a failed run.
func dumpLog(t *testing.T, path string, log []Record) {
	f, err := os.Create(path)
	if err != nil {
		t.Logf("chaos: dump the log: %v", err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range log {
		_ = enc.Encode(map[string]any{"seq": r.Seq, "type": shortType(r.Event.Type), "subject": r.Event.Subject, "data": r.Event.Data})
	}
	t.Logf("chaos: the log is in %s", path)
}
