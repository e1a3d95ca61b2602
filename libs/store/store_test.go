package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func open(t *testing.T) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	s, err := Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// log builds stream records with consecutive sequences.
type log struct{ recs []Record }

func (l *log) add(typ events.Type, data any) {
	seq := uint64(len(l.recs) + 1)
	l.recs = append(l.recs, Record{Seq: seq, Event: events.Event{ID: fmt.Sprint("e", seq), Type: typ, Source: "test",
		Time: t0.Add(time.Duration(seq) * time.Second), Data: data}})
}

func ref(ns, name string) events.WorkloadRef { return events.WorkloadRef{Namespace: ns, Name: name} }

func (l *log) submit(ns, name string) {
	wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},"spec":{"queueName":"lq","priority":3,"podSets":[]}}`, name, ns)
	l.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref(ns, name), Workload: json.RawMessage(wl), CreatedAt: t0})
}

func admission(cpu int64) scheduler.Admission {
	return scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 2,
		Flavors: map[corev1.ResourceName]string{"cpu": "f"}, Usage: map[corev1.ResourceName]int64{"cpu": cpu}}}}
}

func story() *log {
	l := &log{}
	l.add(events.ConfigApplied, &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "LocalQueue", Namespace: "ns", Name: "lq"},
		Object: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}`)})
	l.submit("ns", "w1")
	l.submit("ns", "w2")
	l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", "w1"), Admission: admission(3000)})
	l.add(events.Inadmissible, &events.InadmissibleData{WorkloadRef: ref("ns", "w2"), Reason: scheduler.Reason{Token: scheduler.WaitingForQuota, Message: "full"}})
	l.submit("ns", "w3")
	l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", "w3"), Admission: admission(1000)})
	l.add(events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref("ns", "w1"), Succeeded: true})
	l.add(events.BatchSkipped, &events.BatchSkippedData{Event: "podsready/ns/w3/timeout/1", Type: events.Evicted,
		Subject: events.WorkloadSubject("ns", "w3"), Reason: "fenced"})
	l.add(events.WorkloadDeleted, &events.WorkloadRef{Namespace: "ns", Name: "w2"})
	return l
}

type state struct {
	Status map[string]string
	Usage  []Usage
	Last   uint64
}

func snapshot(t *testing.T, s *Store) state {
	t.Helper()
	ctx := context.Background()
	views, _, err := s.ListWorkloads(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	st := state{Status: map[string]string{}}
	for _, v := range views {
		st.Status[v.Name] = v.Status + "/" + v.ClusterQueue
	}
	if st.Usage, err = s.ClusterQueueUsage(ctx, "cq"); err != nil {
		t.Fatal(err)
	}
	if st.Last, err = s.LastSeq(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestProjectionFoldsTheStory(t *testing.T) {
	s := open(t)
	l := story()
	if n, err := s.Apply(context.Background(), l.recs); err != nil || n != len(l.recs) {
		t.Fatalf("applied %d, %v", n, err)
	}
	want := state{Status: map[string]string{"w1": "finished/cq", "w3": "admitted/cq"},
		Usage: []Usage{{Flavor: "f", Resource: "cpu", Used: 1000}}, Last: uint64(len(l.recs))}
	if d := cmp.Diff(want, snapshot(t, s)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	v, hist, err := s.GetWorkload(context.Background(), "ns", "w3")
	if err != nil {
		t.Fatal(err)
	}
	if v.Assignment["main"]["cpu"] != "f" || v.PodCounts["main"] != 2 || len(hist) != 2 {
		t.Errorf("w3: %+v with %d history entries", v, len(hist))
	}
	if _, hist, err := s.GetWorkload(context.Background(), "ns", "w2"); !errors.Is(err, ErrNotFound) || hist != nil {
		t.Errorf("deleted w2: %v", err)
	}
}

// TestReplayAndRedeliveryChangeNothing: applying the same records again,
// whole or overlapping, is a no-op guarded by the stored sequence.
func TestReplayAndRedeliveryChangeNothing(t *testing.T) {
	s := open(t)
	l := story()
	ctx := context.Background()
	if _, err := s.Apply(ctx, l.recs[:5]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Apply(ctx, l.recs[3:]); err != nil || n != len(l.recs)-5 {
		t.Fatalf("overlapping batch applied %d, %v; want %d", n, err, len(l.recs)-5)
	}
	once := snapshot(t, s)
	if n, err := s.Apply(ctx, l.recs); err != nil || n != 0 {
		t.Fatalf("full replay applied %d, %v", n, err)
	}
	if d := cmp.Diff(once, snapshot(t, s)); d != "" {
		t.Errorf("replay changed the projection (-once +twice):\n%s", d)
	}
	var hist int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workload_events`).Scan(&hist); err != nil || hist != len(l.recs)-2 {
		t.Errorf("history rows %d, want %d (every workload event once)", hist, len(l.recs)-2)
	}
}

func TestRebuildFromScratchMatches(t *testing.T) {
	s := open(t)
	l := story()
	ctx := context.Background()
	for _, r := range l.recs {
		if _, err := s.Apply(ctx, []Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	oneByOne := snapshot(t, s)
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, l.recs); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(oneByOne, snapshot(t, s)); d != "" {
		t.Errorf("one batch differs from one event at a time (-single +batch):\n%s", d)
	}
}

func TestKeysetPagination(t *testing.T) {
	s := open(t)
	l := &log{}
	for i := range 250 {
		l.submit(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("w%03d", i))
	}
	ctx := context.Background()
	if _, err := s.Apply(ctx, l.recs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, next, err := s.ListWorkloads(ctx, Filter{Limit: 100, After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, v := range page {
			k := v.Namespace + "/" + v.Name
			if seen[k] {
				t.Fatalf("%s on two pages", k)
			}
			seen[k] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if pages != 3 || len(seen) != 250 {
		t.Errorf("%d pages, %d workloads", pages, len(seen))
	}
	if _, _, err := s.ListWorkloads(ctx, Filter{After: "%%%"}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}

// TestConcurrentOpenMigratesOnce: instances starting together serialize
// on the advisory lock.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	url := testenv.Postgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), url)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestGapIsRefusedNeverSkipped: a batch that does not continue the
// projection at last_seq+1 is refused whole, and nothing moves; the
// same sequences accounted for (the missing one as gone) are accepted.
func TestGapIsRefusedNeverSkipped(t *testing.T) {
	s := open(t)
	l := story()
	ctx := context.Background()
	if _, err := s.Apply(ctx, l.recs[:3]); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, s)
	_, err := s.Apply(ctx, l.recs[4:])
	var seqErr *SequenceError
	if !errors.As(err, &seqErr) || *seqErr != (SequenceError{Last: 3, Next: 5}) {
		t.Fatalf("batch from 5 after 3: %v, want a SequenceError{3, 5}", err)
	}
	// A hole inside a batch is refused too.
	holed := append([]Record{l.recs[3]}, l.recs[5:]...)
	if _, err := s.Apply(ctx, holed); !errors.As(err, &seqErr) || *seqErr != (SequenceError{Last: 4, Next: 6}) {
		t.Fatalf("batch 4,6,...: %v, want a SequenceError{4, 6}", err)
	}
	if d := cmp.Diff(before, snapshot(t, s)); d != "" {
		t.Fatalf("a refused batch changed the projection (-before +after):\n%s", d)
	}
	// Sequence 4 gone from the stream: the same batch, accounted for.
	gone := append([]Record{{Seq: 4, Gone: 1}}, l.recs[4:]...)
	if n, err := s.Apply(ctx, gone); err != nil || n != len(l.recs)-3 {
		t.Fatalf("batch with 4 gone: applied %d, %v; want %d", n, err, len(l.recs)-3)
	}
	if got := snapshot(t, s); got.Last != uint64(len(l.recs)) || got.Status["w2"] != "" {
		t.Errorf("after the gone span: %+v", got)
	}
	// A gone span straddling the position counts only its new part.
	if n, err := s.Apply(ctx, []Record{{Seq: 5, Gone: uint64(len(l.recs))}}); err != nil || n != 1 {
		t.Fatalf("straddling span: applied %d, %v", n, err)
	}
	if last, _ := s.LastSeq(ctx); last != uint64(len(l.recs))+4 {
		t.Errorf("last_seq %d after a span through %d", last, len(l.recs)+4)
	}
}

// TestUnstorableEventIsParked: a payload jsonb refuses (a NUL) fails its
// batch as Unstorable, without effect; passed again as Parked it is
// stored aside with its raw bytes and the projection moves past it.
func TestUnstorableEventIsParked(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	l := &log{}
	l.submit("ns", "fine")
	l.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref("ns", "poison"), CreatedAt: t0,
		Workload: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"poison","namespace":"ns","annotations":{"a":"nul\u0000"}},"spec":{"queueName":"lq","podSets":[]}}`)})
	l.submit("ns", "after")
	_, err := s.Apply(ctx, l.recs)
	if err == nil || !Unstorable(err) {
		t.Fatalf("batch with a NUL in jsonb: %v, want an Unstorable error", err)
	}
	if last, _ := s.LastSeq(ctx); last != 0 {
		t.Fatalf("a failed batch moved the projection to %d", last)
	}
	body, _ := l.recs[1].Event.Body()
	l.recs[1].Parked = &Parked{Type: string(events.WorkloadSubmitted), Subject: "jq.x\x00", Data: body, Reason: err.Error() + "\x00\xff"}
	if n, err := s.Apply(ctx, l.recs); err != nil || n != 3 {
		t.Fatalf("batch with the poison parked: applied %d, %v", n, err)
	}
	got := snapshot(t, s)
	if d := cmp.Diff(map[string]string{"fine": "pending/", "after": "pending/"}, got.Status); d != "" || got.Last != 3 {
		t.Errorf("projection at %d (-want +got):\n%s", got.Last, d)
	}
	parked, err := s.ParkedEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].Seq != 2 || string(parked[0].Data) != string(body) || parked[0].Subject != "jq.x\uFFFD" {
		t.Errorf("parked %+v", parked)
	}
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if parked, _ := s.ParkedEvents(ctx, 0); len(parked) != 0 {
		t.Errorf("reset kept %d parked events", len(parked))
	}
}

// TestDatabaseDownIsNotUnstorable: losing the database is worth retrying;
// only content errors are Unstorable.
func TestDatabaseDownIsNotUnstorable(t *testing.T) {
	s := open(t)
	l := story()
	s.Close()
	_, err := s.Apply(context.Background(), l.recs)
	if err == nil || Unstorable(err) {
		t.Fatalf("apply on a closed pool: %v; want an error that is not Unstorable", err)
	}
}

// TestWorkloadStatusAsKueueWrites: the stored Kueue status of a workload
// is what Kueue v0.6.3 writes. Without waitForPodsReady an admission
// gives QuotaReserved and Admitted only (the job reconciler writes
// PodsReady only with waitForPodsReady enabled); with it, PodsReady
// False too. A finished workload keeps status.admission (the job
// reconciler adds the Finished condition and nothing else; the workload
// controller leaves a finished workload alone) while its quota is
// released.
func TestWorkloadStatusAsKueueWrites(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	l := story()
	l.add(events.ConfigApplied, &events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: "Configuration", Name: "config"},
		Object: json.RawMessage(`{"apiVersion":"config.kueue.x-k8s.io/v1beta1","kind":"Configuration","waitForPodsReady":{"enable":true}}`)})
	l.submit("ns", "w4")
	l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", "w4"), Admission: admission(500)})
	// Submitted with spec.active false: Kueue's workload controller marks
	// it evicted at once.
	l.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref("ns", "w5"), CreatedAt: t0,
		Workload: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w5","namespace":"ns"},"spec":{"queueName":"lq","active":false,"podSets":[]}}`)})
	// w6, submitted inactive, is listed by a LocalQueue created after it
	// and admitted for a moment: admission publishes only its eviction.
	l.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref("ns", "w6"), CreatedAt: t0,
		Workload: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w6","namespace":"ns"},"spec":{"queueName":"lq","active":false,"podSets":[]}}`)})
	l.add(events.Evicted, &events.EvictedData{WorkloadRef: ref("ns", "w6"), Reason: "InactiveWorkload"})
	// w7, the same but finished before its LocalQueue existed.
	l.add(events.WorkloadSubmitted, &events.WorkloadSubmittedData{WorkloadRef: ref("ns", "w7"), CreatedAt: t0,
		Workload: json.RawMessage(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w7","namespace":"ns"},"spec":{"queueName":"lq","active":false,"podSets":[]}}`)})
	l.add(events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref("ns", "w7"), Succeeded: true})
	l.add(events.Evicted, &events.EvictedData{WorkloadRef: ref("ns", "w7"), Reason: "InactiveWorkload"})
	if _, err := s.Apply(ctx, l.recs); err != nil {
		t.Fatal(err)
	}
	get := func(name string) WorkloadObject {
		t.Helper()
		rows, _, err := s.WorkloadObjects(ctx, Filter{Namespace: "ns", Name: name, Limit: 1})
		if err != nil || len(rows) != 1 {
			t.Fatalf("%s: %d rows, %v", name, len(rows), err)
		}
		return rows[0]
	}
	cond := func(typ, st, reason, msg string, seq int) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st), Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(seq) * time.Second))}
	}
	w1 := get("w1")
	if diff := cmp.Diff([]metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 4),
		cond("Admitted", "True", "Admitted", "The workload is admitted", 4),
		cond("Finished", "True", "JobFinished", "Job finished successfully", 8)}, w1.Kueue.Conditions); diff != "" {
		t.Errorf("finished w1, conditions (-want,+got):\n%s", diff)
	}
	want := admission(3000)
	if diff := cmp.Diff(&want, w1.Admission); diff != "" {
		t.Errorf("finished w1, admission (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.Condition{cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 13),
		cond("Admitted", "True", "Admitted", "The workload is admitted", 13),
		cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded", 13)}, get("w4").Kueue.Conditions); diff != "" {
		t.Errorf("w4 under waitForPodsReady, conditions (-want,+got):\n%s", diff)
	}
	w5 := get("w5")
	if diff := cmp.Diff([]metav1.Condition{cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated", 14)}, w5.Kueue.Conditions); diff != "" {
		t.Errorf("w5 submitted inactive, conditions (-want,+got):\n%s", diff)
	}
	if w5.Status != StatusInactive {
		t.Errorf("w5 submitted inactive: status %s", w5.Status)
	}
	if w6 := get("w6"); w6.Status != StatusInactive || w6.Evictions != 0 {
		t.Errorf("w6, inactive and evicted again: status %s, evictions %d; want inactive, 0", w6.Status, w6.Evictions)
	}
	if w7 := get("w7"); w7.Status != StatusFinished || w7.Evictions != 0 {
		t.Errorf("w7, finished, inactive and evicted again: status %s, evictions %d; want finished, 0", w7.Status, w7.Evictions)
	}
	// The finished workload's quota is released all the same.
	usage, err := s.ClusterQueueUsage(ctx, "cq")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Usage{{Flavor: "f", Resource: "cpu", Used: 1500}}, usage); diff != "" {
		t.Errorf("usage (-want,+got):\n%s", diff)
	}
}

// TestSubmittedObjectOutlivesLaterBatches: a workload's submitted object
// is written by the batch of its submission only; the batches of its
// later events leave it as it is.
func TestSubmittedObjectOutlivesLaterBatches(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	l := &log{}
	l.submit("ns", "w1")
	want := l.recs[0].Event.Data.(*events.WorkloadSubmittedData).Workload
	steps := []func(){
		func() {},
		func() {
			l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", "w1"), Admission: admission(1)})
		},
		func() { l.add(events.PodsReady, &events.WorkloadRef{Namespace: "ns", Name: "w1"}) },
		func() {
			l.add(events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref("ns", "w1"), Succeeded: true})
		},
	}
	for i, step := range steps {
		step()
		if _, err := s.Apply(ctx, l.recs); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := s.Pool.QueryRow(ctx, `SELECT object FROM workloads WHERE namespace = 'ns' AND name = 'w1'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(want, &a)
		_ = json.Unmarshal(got, &b)
		if d := cmp.Diff(a, b); d != "" {
			t.Errorf("after batch %d, the stored object (-submitted +stored):\n%s", i+1, d)
		}
	}
}

// TestUnsetColumnsAreNull: a pending workload's admission, reason
// detail and times it does not have are stored as NULL (not a JSON null
// or a zero time), which queries such as `admission IS NOT NULL` read.
func TestUnsetColumnsAreNull(t *testing.T) {
	s := open(t)
	l := &log{}
	l.submit("ns", "w1")
	if _, err := s.Apply(context.Background(), l.recs); err != nil {
		t.Fatal(err)
	}
	var adm, detail, queued, requeue, admitted *string
	if err := s.Pool.QueryRow(context.Background(), `SELECT admission::text, reason_detail::text, queue_time::text, requeue_at::text, admitted_at::text
		FROM workloads WHERE namespace = 'ns' AND name = 'w1'`).Scan(&adm, &detail, &queued, &requeue, &admitted); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*string{"admission": adm, "reason_detail": detail, "queue_time": queued, "requeue_at": requeue, "admitted_at": admitted} {
		if v != nil {
			t.Errorf("%s = %q, want NULL", name, *v)
		}
	}
}
