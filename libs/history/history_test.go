package history

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func objects(t *testing.T, yaml string) []api.Object {
	t.Helper()
	objs, err := api.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		api.Default(o)
		if err := api.Validate(o); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

const config = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: rf}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
`

func workload(name string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: %s, namespace: ns}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
`, name)
}

// snapshot is what is compared: each workload's status, queue, flavors
// and priority.
func snapshot(e *engine.Engine) map[string]string {
	out := map[string]string{}
	for k, w := range e.Workloads() {
		s := fmt.Sprintf("%s p=%d", w.Status, w.Info.Priority)
		if w.Admission != nil {
			s += fmt.Sprintf(" in %s %v", w.Admission.ClusterQueue, w.Admission.PodSets[0].Flavors)
		}
		out[k] = s
	}
	return out
}

// TestFoldAtEachInstant records a run minute by minute, capturing the
// deciding engine's state after each minute; folding the log up to each
// minute gives the state captured then.
func TestFoldAtEachInstant(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	captured := map[time.Time]map[string]string{}
	steps := []func(at time.Time) error{
		func(at time.Time) error { return r.Submit(objects(t, workload("a"))[0].(*api.Workload), at) },
		func(at time.Time) error { return r.Submit(objects(t, workload("b"))[0].(*api.Workload), at) },
		func(at time.Time) error { return r.Submit(objects(t, workload("c"))[0].(*api.Workload), at) },
		func(at time.Time) error { return r.SetPriority("ns/c", 50, at) }, // preempts a or b
		func(at time.Time) error { return r.Finish("ns/c", at) },
		func(at time.Time) error { return r.Submit(objects(t, workload("d"))[0].(*api.Workload), at) },
	}
	for i, step := range steps {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		if err := step(at); err != nil {
			t.Fatal(err)
		}
		r.Settle(at)
		captured[at] = snapshot(r.Eng)
	}
	changed := 0
	for i := range steps {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		st, err := Fold(r.Log, at.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(captured[at], snapshot(st.Engine)); d != "" {
			t.Errorf("at %s (-captured,+folded):\n%s", at, d)
		}
		if i > 0 && !cmp.Equal(captured[at], captured[at.Add(-time.Minute)]) {
			changed++
		}
	}
	if changed < 4 {
		t.Fatalf("only %d steps changed the state: the test proves little", changed)
	}
}

func TestFoldBeforeHistory(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Fold(r.Log, t0.Add(-time.Second)); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("before the first event: %v", err)
	} else if want := "the earliest time available is 2026-01-01T00:00:00Z"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := Fold(r.Log[1:], t0); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("log without its beginning: %v", err)
	}
	if _, err := Fold(r.Log, t0); err != nil {
		t.Errorf("at the first event: %v", err)
	}
}

// TestCompactKeepsTheLiveState: folding the compacted log gives the live
// workloads (not finished, not deleted) of the full fold exactly, from a
// fraction of the events.
func TestCompactKeepsTheLiveState(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	at := t0
	for i := range 40 {
		at = at.Add(time.Minute)
		if err := r.Submit(objects(t, workload(fmt.Sprint("w", i)))[0].(*api.Workload), at); err != nil {
			t.Fatal(err)
		}
		r.Settle(at)
		switch {
		case i%5 == 4: // a priority change that preempts
			if err := r.SetPriority(fmt.Sprint("ns/w", i), 100, at); err != nil {
				t.Fatal(err)
			}
		case i%3 == 2: // finish the first that runs, by name
			var keys []string
			for k, w := range r.Eng.Workloads() {
				if w.Status == engine.Admitted {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			if len(keys) > 0 {
				if err := r.Finish(keys[0], at); err != nil {
					t.Fatal(err)
				}
			}
		}
		r.Settle(at)
	}
	full, err := Fold(r.Log, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := Compact(r.Log, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	compact, err := Fold(short, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	live := func(st *State) map[string]string {
		out := snapshot(st.Engine)
		for k, w := range st.Engine.Workloads() {
			if w.Status == engine.Finished {
				delete(out, k)
			} else {
				out[k] += " " + st.Reasons[k].Message
			}
		}
		return out
	}
	if d := cmp.Diff(live(full), live(compact)); d != "" {
		t.Errorf("live state (-full,+compacted):\n%s", d)
	}
	pending := 0
	for _, w := range compact.Engine.Workloads() {
		if w.Status == engine.Pending {
			pending++
		}
	}
	if pending == 0 || len(short)*4 > len(r.Log)*3 {
		t.Fatalf("%d pending, %d of %d events kept: the test proves little", pending, len(short), len(r.Log))
	}
	t.Logf("%d pending, %d of %d events kept", pending, len(short), len(r.Log))
	if _, err := Compact(r.Log, t0.Add(-time.Second)); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("compacting before the history: %v", err)
	}
}

// TestFoldRefusesAGap: events removed from the middle of the log (before
// the instant asked) make the state unknowable from events alone.
func TestFoldRefusesAGap(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := r.Submit(objects(t, workload(fmt.Sprint("w", i)))[0].(*api.Workload), t0.Add(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	gap := append(append([]Record(nil), r.Log[:4]...), r.Log[5:]...) // the second submission removed
	if _, err := Fold(gap, t0.Add(time.Hour)); !errors.Is(err, ErrBeforeHistory) || !strings.Contains(err.Error(), "events 5 to 5") {
		t.Errorf("a point in time after a gap: %v", err)
	}
	// The present folds from what retention keeps, as the deciders do.
	now, err := Fold(gap, time.Time{})
	if err != nil {
		t.Fatalf("the present after a gap: %v", err)
	}
	if now.Engine.Workload("ns/w1") != nil || now.Engine.Workload("ns/w0") == nil || now.Engine.Workload("ns/w2") == nil {
		t.Errorf("the present after a gap: want w0 and w2 and no w1")
	}
	// The removed event (seq 5) may have happened by 1m30s: the fold up
	// to then stops before it, so it cannot say.
	if _, err := Fold(gap, t0.Add(90*time.Second)); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("just before the gap: %v", err)
	}
	if _, err := Fold(gap, t0.Add(30*time.Second)); err != nil {
		t.Errorf("before the gap: %v", err)
	}
}

// purge removes from log what retention's pass with gate floor removes
// (libs/retention): the whole history of each workload that ended
// (deleted or expired) at or below floor, and each configuration
// subject's versions before its latest, when the latest is at or below
// floor.
func purge(log []Record, floor uint64) []Record {
	end, latest := map[string]uint64{}, map[string]uint64{}
	for _, r := range log {
		if r.Seq > floor {
			continue
		}
		if ref, ok := workloadOf(r.Event); ok && events.Ends(r.Event.Type) {
			end[replay.Key(ref)] = r.Seq
		}
		switch r.Event.Data.(type) {
		case *events.ConfigAppliedData, *events.ConfigRef:
			latest[r.Event.Subject] = r.Seq
		}
	}
	var kept []Record
	for _, r := range log {
		ref, isWl := workloadOf(r.Event)
		switch {
		case isWl && r.Seq <= end[replay.Key(ref)]:
		case !isWl && r.Seq < latest[r.Event.Subject]:
		default:
			kept = append(kept, r)
		}
	}
	return kept
}

// TestFoldAfterPurge records a run minute by minute (a ClusterQueue
// applied twice, workloads submitted, finished, expired, deleted),
// capturing the deciding engine's state after each minute, then purges
// the log as retention does with the floor at the last ended event. From
// the earliest time the purged log answers (the time of the first event
// kept at or after the floor) on, folding it up to each minute gives the
// state captured then; before, it is a PurgedError naming that time, and
// never a wrong state.
func TestFoldAfterPurge(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	captured := map[time.Time]map[string]string{}
	wl := func(n string) *api.Workload { return objects(t, workload(n))[0].(*api.Workload) }
	steps := []func(at time.Time) error{
		func(at time.Time) error { return r.Submit(wl("a"), at) },
		func(at time.Time) error { return r.Submit(wl("b"), at) },
		func(at time.Time) error { return r.Submit(wl("c"), at) },
		func(at time.Time) error { return r.Apply(objects(t, strings.Replace(config, `"2"`, `"3"`, 1))[1], at) },
		func(at time.Time) error { return r.Finish("ns/a", at) },
		func(at time.Time) error { return r.Expire("ns/a", at) },
		func(at time.Time) error { return r.Submit(wl("d"), at) },
		func(at time.Time) error { return r.Finish("ns/b", at) },
		func(at time.Time) error { return r.Expire("ns/b", at) },
		func(at time.Time) error { return r.Submit(wl("e"), at) },
		func(at time.Time) error { return r.SetPriority("ns/e", 50, at) },
		func(at time.Time) error { return r.Finish("ns/c", at) },
	}
	var floor uint64
	for i, step := range steps {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		if err := step(at); err != nil {
			t.Fatal(err)
		}
		r.Settle(at)
		captured[at] = snapshot(r.Eng)
		if i == 8 {
			floor = r.Log[len(r.Log)-1].Seq // b's expiry
		}
	}
	kept := purge(r.Log, floor)
	if len(kept) >= len(r.Log)-5 {
		t.Fatalf("the purge kept %d of %d events: the test proves little", len(kept), len(r.Log))
	}
	earliest, ok := Earliest(kept, floor)
	if want := t0.Add(10 * time.Minute); !ok || !earliest.Equal(want) {
		t.Fatalf("earliest time answerable: %s %v, want %s (e's submission, the first event after b's expiry)", earliest, ok, want)
	}
	answered, wrong := 0, 0
	for i := range steps {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		for _, q := range []time.Time{at, at.Add(30 * time.Second)} {
			st, err := FoldKept(kept, q, floor)
			if q.Before(earliest) {
				var pe *PurgedError
				if !errors.As(err, &pe) || !errors.Is(err, ErrBeforeHistory) || !strings.Contains(err.Error(), earliest.Format(time.RFC3339Nano)) {
					t.Errorf("at %s, before %s: %v, want a PurgedError naming %s", q, earliest, err, earliest)
				}
				// Folded regardless, the purged log would answer wrong.
				if !cmp.Equal(captured[at], snapshot(fold(kept, q).Engine)) {
					wrong++
				}
				continue
			}
			if err != nil {
				t.Fatalf("at %s: %v", q, err)
			}
			answered++
			if d := cmp.Diff(captured[at], snapshot(st.Engine)); d != "" {
				t.Errorf("at %s (-captured,+folded from the purged log):\n%s", q, d)
			}
			if got := st.ClusterQueues["cq"].Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.String(); got != "3" {
				t.Errorf("at %s: the ClusterQueue's quota is %s, want 3", q, got)
			}
		}
	}
	if answered < 4 || wrong == 0 {
		t.Fatalf("%d instants answered, %d refused that a fold regardless gets wrong: the test proves little", answered, wrong)
	}
	// Without the floor, the gaps are nobody's: refused, as before.
	if _, err := Fold(kept, t0.Add(time.Hour)); !errors.Is(err, ErrBeforeHistory) || errors.As(err, new(*PurgedError)) {
		t.Errorf("a purged log without its floor: %v", err)
	}
	// A gap above the floor is not retention's: refused at any time.
	foreign := append(append([]Record(nil), kept[:len(kept)-2]...), kept[len(kept)-1])
	if _, err := FoldKept(foreign, t0.Add(time.Hour), floor); !errors.Is(err, ErrBeforeHistory) || !strings.Contains(err.Error(), "were removed") {
		t.Errorf("a gap above the floor: %v", err)
	}
}

// TestFoldSkipsForeignDecisions: a decision published under a source
// that does not own it is skipped, as the deciders skip it.
func TestFoldSkipsForeignDecisions(t *testing.T) {
	r := NewRecorder()
	for _, o := range objects(t, config) {
		if err := r.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // the queue holds 2: w2 waits
		if err := r.Submit(objects(t, workload(fmt.Sprint("w", i)))[0].(*api.Workload), t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		r.Settle(t0.Add(time.Minute))
	}
	if st := r.Eng.Workload("ns/w2").Status; st != engine.Pending {
		t.Fatalf("w2 is %s, want pending", st)
	}
	ref := events.WorkloadRef{Namespace: "ns", Name: "w2"}
	forged := Record{Seq: uint64(len(r.Log) + 1), Event: events.Event{ID: "forged", Type: events.QuotaReserved,
		Source: events.SourceIngest, Time: t0.Add(2 * time.Minute), Subject: events.WorkloadSubject("ns", "w2"),
		Data: &events.QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq"}}}}
	st, err := Fold(append(r.Log, forged), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Engine.Workload("ns/w2").Status; got != engine.Pending || st.Skipped != 1 {
		t.Errorf("after a forged admission: w2 %s, %d skipped; want pending, 1", got, st.Skipped)
	}
}
