package whatif

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/history"
)

// These tests hand the replay histories as the services write them in
// real time, where a run of the core decides after a batch of events, its
// decisions go out after later events, a later sequence can carry an
// earlier time, and a victim can finish before its eviction. Each is
// built with the Recorder and, where the Recorder cannot say it, edited;
// with the configuration unchanged the replay must give the recorded
// figures back.

// recorderWith applies config at t0.
func recorderWith(t *testing.T, config string) *history.Recorder {
	t.Helper()
	r := history.NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func submit(t *testing.T, r *history.Recorder, wl *api.Workload, at time.Time) {
	t.Helper()
	if err := r.Submit(wl, at); err != nil {
		t.Fatal(err)
	}
}

func finish(t *testing.T, r *history.Recorder, key string, at time.Time) {
	t.Helper()
	if err := r.Finish(key, at); err != nil {
		t.Fatal(err)
	}
}

// finishSettled finishes key at at, and the service decides 1 ms later.
func finishSettled(t *testing.T, r *history.Recorder, key string, at time.Time) {
	t.Helper()
	finish(t, r, key, at)
	r.Settle(at.Add(time.Millisecond))
}

// unchanged replays log over [t0, to] with the configuration as recorded
// and wants every queue's figures back, and nothing moved.
func unchanged(t *testing.T, log []history.Record, to time.Time) Report {
	t.Helper()
	rep, err := Run(log, Options{From: t0, To: to})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range rep.Queues {
		if d := cmp.Diff(q.Old, q.New); d != "" {
			t.Errorf("%s (-recorded,+replayed):\n%s", q.ClusterQueue, d)
		}
	}
	if len(rep.Moved) != 0 {
		t.Errorf("moved: %+v", rep.Moved)
	}
	return rep
}

// moveAfter moves the record at index i to just after index j (j > i),
// as the log reads when events arrive while a run's decisions are still
// going out.
func moveAfter(log []history.Record, i, j int) []history.Record {
	out := append([]history.Record{}, log[:i]...)
	out = append(out, log[i+1:j+1]...)
	out = append(out, log[i])
	return renumber(append(out, log[j+1:]...))
}

// renumber numbers an edited log again from 1, keeping what each
// decision's id says it was decided after (records added by the edit
// have sequence 0).
func renumber(log []history.Record) []history.Record {
	to := map[uint64]uint64{}
	for k := range log {
		if log[k].Seq != 0 {
			to[log[k].Seq] = uint64(k + 1)
		}
	}
	n := map[uint64]int{}
	for k := range log {
		log[k].Seq = uint64(k + 1)
		if at, ok := events.DecidedAt(log[k].Event); ok {
			log[k].Event.ID = events.DecisionID("admission", to[at], n[at])
			n[at]++
		}
	}
	return log
}

// finishedFirst edits the log's preemption of victim, decided at decided,
// into one the victim outran: it finishes 1 ms after the decision and is
// neither evicted nor admitted again. at says where the log has the
// finish: 'e' in place of its eviction (the preemptor came too late), 'r'
// just before the request, which leaves it out, 'x' in place of the
// request, never written (its only victim had finished).
func finishedFirst(log []history.Record, victim events.WorkloadRef, decided time.Time, at byte) []history.Record {
	fin := history.Record{Event: events.Event{ID: "finished-first", Type: events.WorkloadFinished, Source: events.SourceIngest,
		Time: decided.Add(time.Millisecond), Subject: events.WorkloadSubject(victim.Namespace, victim.Name),
		Data: &events.WorkloadFinishedData{WorkloadRef: victim, Succeeded: true}}}
	var out []history.Record
	for _, rec := range log {
		switch x := rec.Event.Data.(type) {
		case *events.PreemptionRequestedData:
			switch at {
			case 'x':
				out = append(out, fin)
				continue
			case 'r':
				out = append(out, fin)
				req := *x
				req.Victims = slices.DeleteFunc(slices.Clone(x.Victims), func(v events.Victim) bool { return v.WorkloadRef == victim })
				rec.Event.Data = &req
			}
		case *events.EvictedData:
			if x.WorkloadRef == victim {
				if at == 'e' {
					out = append(out, fin)
				}
				continue
			}
		case *events.QuotaReservedData:
			if x.WorkloadRef == victim && rec.Event.Time.After(decided) {
				continue
			}
		case *events.InadmissibleData:
			if x.WorkloadRef == victim && !rec.Event.Time.Before(decided) {
				continue
			}
		}
		out = append(out, rec)
	}
	return renumber(out)
}

// lowThenHigh records lows (1 cpu each) admitted at 1 s on a queue of as
// many cpu, high (priority 10, every cpu) preempting them at 1 min, and
// high finishing at 2 min. It returns the preemption's time.
func lowThenHigh(t *testing.T, lows ...string) (*history.Recorder, time.Time) {
	t.Helper()
	r := recorderWith(t, flavor+queue("a", "", fmt.Sprint(len(lows))))
	for _, n := range lows {
		submit(t, r, workload("a", n, 1, 0), t0.Add(time.Second))
	}
	r.Settle(t0.Add(time.Second + time.Millisecond))
	submit(t, r, workload("a", "high", len(lows), 10), t0.Add(time.Minute))
	decided := t0.Add(time.Minute + time.Millisecond)
	r.Settle(decided)
	finishSettled(t, r, "a/high", t0.Add(2*time.Minute))
	return r, decided
}

// TestRunAfterABatch: a 1-cpu queue gets a low- and a high-priority
// workload together and the service decides once after both: the high one
// is admitted first. Deciding after each event would admit the low one
// first.
func TestRunAfterABatch(t *testing.T) {
	r := recorderWith(t, flavor+queue("a", "", "1"))
	submit(t, r, workload("a", "low", 1, 0), t0.Add(time.Second))
	submit(t, r, workload("a", "high", 1, 10), t0.Add(time.Second))
	r.Settle(t0.Add(time.Second + time.Millisecond))
	if len(r.Admitted) != 1 || r.Admitted[0] != "a/high" {
		t.Fatalf("recorded %v, want a/high admitted", r.Admitted)
	}
	finishSettled(t, r, "a/high", t0.Add(time.Minute))
	finishSettled(t, r, "a/low", t0.Add(2*time.Minute))
	rep := unchanged(t, r.Log, t0.Add(time.Hour))
	if got := rep.Queues[0].Old; got.Admitted != 2 || got.MeanWaitSeconds != 29.501 {
		t.Fatalf("recorded %+v, want 2 admitted, waits 0.001 and 59.001 s", got)
	}
}

// TestLogOrderNotStampOrder: an event written after a run of the core can
// carry an earlier time (its publisher stamped it first). The high
// workload, written after the low one was admitted but stamped before,
// preempts it; replayed ahead of that run, it would be admitted without.
func TestLogOrderNotStampOrder(t *testing.T) {
	r := recorderWith(t, flavor+queue("a", "", "1"))
	submit(t, r, workload("a", "low", 1, 0), t0.Add(time.Second+5*time.Millisecond))
	r.Settle(t0.Add(time.Second + 6*time.Millisecond))
	submit(t, r, workload("a", "high", 1, 10), t0.Add(time.Second+4*time.Millisecond))
	r.Settle(t0.Add(time.Second + 7*time.Millisecond))
	finishSettled(t, r, "a/high", t0.Add(time.Minute))
	finishSettled(t, r, "a/low", t0.Add(2*time.Minute))
	rep := unchanged(t, r.Log, t0.Add(time.Hour))
	if q := rep.Queues[0].Old; q.Preemptions != 1 || q.Admitted != 2 {
		t.Fatalf("recorded %+v, want low preempted by high", q)
	}
}

// TestQuietWhileBusy: a run's decisions go out over a while; a finish
// arriving meanwhile, even followed by a quiet spell, is decided in the
// next run, with the high workload that arrived after it, not on its own.
func TestQuietWhileBusy(t *testing.T) {
	quietWhileBusy(t, 2*time.Second)
}

// TestQuietWhileBusyOnAStillClock is TestQuietWhileBusy with low stamped
// as late as the finish: the log's clock stands still from low to the
// finish, and only the log's positions tell that the finish came while
// the run after low was still writing.
func TestQuietWhileBusyOnAStillClock(t *testing.T) {
	quietWhileBusy(t, 2*time.Second+2*time.Millisecond)
}

func quietWhileBusy(t *testing.T, low time.Duration) {
	lowAt := t0.Add(low)
	r := recorderWith(t, flavor+queue("a", "", "2")+queue("b", "", "1"))
	submit(t, r, workload("a", "long", 1, 0), t0.Add(time.Second))
	submit(t, r, workload("a", "short", 1, 0), t0.Add(time.Second))
	submit(t, r, workload("b", "b1", 1, 0), t0.Add(time.Second))
	submit(t, r, workload("b", "b2", 1, 0), t0.Add(time.Second))
	r.Settle(t0.Add(time.Second + time.Millisecond)) // long, short, b1 admitted; b2 waits
	submit(t, r, workload("a", "low", 1, 0), lowAt)
	n := len(r.Log)
	r.Settle(t0.Add(2*time.Second + time.Millisecond)) // low: inadmissible
	if len(r.Log) != n+1 {
		t.Fatalf("the run after low wrote %d decisions, want 1", len(r.Log)-n)
	}
	// short finishes while that run's decision is still going out, and
	// high arrives 50 ms later; the service decides both together.
	finish(t, r, "a/short", t0.Add(2*time.Second+2*time.Millisecond))
	submit(t, r, workload("a", "high", 1, 10), t0.Add(2*time.Second+52*time.Millisecond))
	r.Settle(t0.Add(2*time.Second + 53*time.Millisecond))
	if len(r.Admitted) != 1 || r.Admitted[0] != "a/high" {
		t.Fatalf("recorded %v, want a/high admitted", r.Admitted)
	}
	log := moveAfter(r.Log, n, n+1) // the decision after the finish
	for _, k := range []string{"a/long", "a/high", "b/b1"} {
		finish(t, r, k, t0.Add(time.Minute))
	}
	r.Settle(t0.Add(time.Minute + time.Millisecond))
	for _, k := range []string{"a/low", "b/b2"} {
		finish(t, r, k, t0.Add(2*time.Minute))
	}
	log = append(log, r.Log[len(log):]...)
	unchanged(t, log, t0.Add(time.Hour))
}

// TestVictimThatFinishedFirst: high preempts low; low finishes before the
// preemptor evicts it, so the log has the request and the finish but no
// eviction. Low's run was complete: not preempted, never pending again.
func TestVictimThatFinishedFirst(t *testing.T) {
	r, decided := lowThenHigh(t, "low")
	if len(r.Admitted) != 1 || r.Admitted[0] != "a/low" {
		t.Fatalf("recorded %v, want a/low admitted again", r.Admitted)
	}
	// Edit: low's eviction never happened; it finished 1 ms after the
	// decision instead, and was not admitted again.
	log := finishedFirst(r.Log, events.WorkloadRef{Namespace: "a", Name: "low"}, decided, 'e')
	rep := unchanged(t, log, t0.Add(time.Hour))
	if q := rep.Queues[0]; q.Old.Preemptions != 0 || q.Old.Admitted != 2 {
		t.Fatalf("recorded %+v, want 2 admitted and no preemption", q.Old)
	}
}

// TestVictimLeftOutOfTheRequest: high preempts low1 and low2; low2
// finishes before admission writes the request, which then names low1
// only. Low2's run was complete; low1 was preempted.
func TestVictimLeftOutOfTheRequest(t *testing.T) {
	r, decided := lowThenHigh(t, "low1", "low2")
	finishSettled(t, r, "a/low1", t0.Add(3*time.Minute))
	// Edit: low2 finished 1 ms after the decision, written before the
	// request, which leaves it out; it is never evicted nor admitted
	// again.
	log := finishedFirst(r.Log, events.WorkloadRef{Namespace: "a", Name: "low2"}, decided, 'r')
	rep := unchanged(t, log, t0.Add(time.Hour))
	if q := rep.Queues[0].Old; q.Preemptions != 1 || q.Admitted != 3 {
		t.Fatalf("recorded %+v, want 3 admitted and low1 preempted", q)
	}
}

// TestRunLongerThanItsLastRun: low is admitted, preempted after a minute,
// admitted again, and then finishes 10 s into that run. Its first run
// lasted a minute without finishing: the replay must not finish it after
// 10 s.
func TestRunLongerThanItsLastRun(t *testing.T) {
	r, _ := lowThenHigh(t, "low")
	finishSettled(t, r, "a/low", t0.Add(2*time.Minute+10*time.Second))
	rep := unchanged(t, r.Log, t0.Add(time.Hour))
	if q := rep.Queues[0].Old; q.Preemptions != 1 || q.Admitted != 2 {
		t.Fatalf("recorded %+v, want low preempted once", q)
	}
}

// TestRequestNotWrittenAsItsVictimFinished: high preempts low, but low
// finishes while the run's decisions go out, so admission writes no
// request at all (its only victim finished) and admits high after it.
func TestRequestNotWrittenAsItsVictimFinished(t *testing.T) {
	r, decided := lowThenHigh(t, "low")
	// Edit: low finished 1 ms after the decision, before high's
	// admission went out; no request, no eviction, and low is not
	// admitted again.
	log := finishedFirst(r.Log, events.WorkloadRef{Namespace: "a", Name: "low"}, decided, 'x')
	rep := unchanged(t, log, t0.Add(time.Hour))
	if q := rep.Queues[0].Old; q.Preemptions != 0 || q.Admitted != 2 {
		t.Fatalf("recorded %+v, want 2 admitted and no preemption", q)
	}
}

// TestRefusedAdmissionIsTakenBack: a run admits w1 and w2, but w2's
// priority changes before its admission is written, so JetStream refuses
// it; admission takes it back and admits w2 again in its next run. The
// log has w1's admission at index 0 of the run and none at index 1.
func TestRefusedAdmissionIsTakenBack(t *testing.T) {
	r := recorderWith(t, flavor+queue("a", "", "2"))
	at := t0.Add(time.Second)
	submit(t, r, workload("a", "w1", 1, 0), at)
	submit(t, r, workload("a", "w2", 1, 0), at)
	r.Settle(at.Add(time.Millisecond))
	if len(r.Admitted) != 2 {
		t.Fatalf("recorded %v, want both admitted", r.Admitted)
	}
	again := r.Log[len(r.Log)-1] // w2's admission, refused
	log := append([]history.Record{}, r.Log[:len(r.Log)-1]...)
	w2 := events.WorkloadRef{Namespace: "a", Name: "w2"}
	log = append(log, history.Record{Event: events.Event{ID: "w2-priority", Type: events.PriorityChanged, Source: events.SourceIngest,
		Time: at.Add(2 * time.Millisecond), Subject: events.WorkloadSubject("a", "w2"),
		Data: &events.PriorityChangedData{WorkloadRef: w2, Priority: 0}}})
	again.Seq = 0
	again.Event.Time = at.Add(3 * time.Millisecond)
	log = renumber(append(log, again))
	// Its next run decided after reading the priority change.
	log[len(log)-1].Event.ID = events.DecisionID("admission", log[len(log)-2].Seq, 0)
	rep := unchanged(t, log, t0.Add(time.Hour))
	if q := rep.Queues[0].Old; q.Admitted != 2 || q.MeanWaitSeconds != 0.002 {
		t.Fatalf("recorded %+v, want waits 0.001 and 0.003 s", q)
	}
}

// TestQuietButAboutToDecide: low arrives, 15 ms pass, high arrives, and
// admission decides both 50 ms later (it took up to 70 ms to react that
// day): high is admitted, low waits. A replay deciding on the quiet after
// low would admit low and have high preempt it.
func TestQuietButAboutToDecide(t *testing.T) {
	r := recorderWith(t, flavor+queue("a", "", "1")+queue("b", "", "1"))
	submit(t, r, workload("b", "x", 1, 0), t0.Add(time.Second))
	r.Settle(t0.Add(time.Second + 70*time.Millisecond))
	at := t0.Add(2 * time.Second)
	submit(t, r, workload("a", "low", 1, 0), at)
	submit(t, r, workload("a", "high", 1, 10), at.Add(15*time.Millisecond))
	r.Settle(at.Add(65 * time.Millisecond))
	if len(r.Admitted) != 1 || r.Admitted[0] != "a/high" {
		t.Fatalf("recorded %v, want a/high admitted", r.Admitted)
	}
	finishSettled(t, r, "a/high", t0.Add(time.Minute))
	finishSettled(t, r, "a/low", t0.Add(2*time.Minute))
	finishSettled(t, r, "b/x", t0.Add(3*time.Minute))
	rep := unchanged(t, r.Log, t0.Add(time.Hour))
	for _, q := range rep.Queues {
		if q.Old.Preemptions != 0 {
			t.Fatalf("recorded %+v, want no preemption", q)
		}
	}
}

// TestForgedDecisionIndexAllocatesNothing: a decision whose id claims an
// index far past anything a run holds (admission/<seq>/16777216) is not
// kept, and the replay allocates nothing in proportion to it.
func TestForgedDecisionIndexAllocatesNothing(t *testing.T) {
	r, _ := lowThenHigh(t, "low")
	log := append([]history.Record{}, r.Log...)
	for i := range log {
		if at, ok := events.DecidedAt(log[i].Event); ok {
			log[i].Event.ID = events.DecisionID("admission", at, 1<<24)
			break
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Run(log, Options{From: t0, To: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("the replay allocated %d MB", got>>20)
	}
}
