package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// frame is one event a console stream sent.
type frame struct {
	id    uint64
	event string
	data  watchedEvent
}

// consoleClient is one open console stream: its frames as they come,
// closed when the server ends the stream.
type consoleClient struct {
	frames chan frame
	resp   *http.Response
}

// openConsole opens GET path on srv and reads its frames; header is
// set on the request (pairs).
func openConsole(t *testing.T, srv *httptest.Server, path string, header ...string) *consoleClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", path, err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	// Up to ": watching": the stream is in place (the hub's reader, or
	// its own) before the test publishes.
	if line, err := br.ReadString('\n'); err != nil || line != ": watching\n" {
		t.Fatalf("GET %s: first line %q %v", path, line, err)
	}
	c := &consoleClient{frames: make(chan frame, 1024), resp: resp}
	go func() {
		defer close(c.frames)
		var f frame
		sc := bufio.NewScanner(br)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.data)
			case line == "" && f.id != 0:
				c.frames <- f
				f = frame{}
			}
		}
	}()
	return c
}

// until reads frames up to the one with id last; false if the stream
// ended first.
func (c *consoleClient) until(t *testing.T, last uint64) ([]frame, bool) {
	t.Helper()
	var got []frame
	for f := range c.frames {
		got = append(got, f)
		if f.id >= last {
			return got, true
		}
	}
	return got, false
}

func ids(fs []frame) []uint64 {
	out := []uint64{}
	for _, f := range fs {
		out = append(out, f.id)
	}
	return out
}

func seqs(from, to uint64) []uint64 {
	out := []uint64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// submitN submits n workloads named prefix-i in ns and returns the
// log's last sequence.
func (f *frontDoor) submitN(t *testing.T, ns, prefix string, n int) uint64 {
	t.Helper()
	for i := range n {
		if code, _, body := f.do(t, "POST", "/v1/workloads", nil, nsWorkload(ns, fmt.Sprintf("%s-%d", prefix, i))); code != http.StatusAccepted {
			t.Fatalf("submit: %d %s", code, body)
		}
	}
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// consumers counts JQ_EVENTS' consumers.
func (f *frontDoor) consumers(t *testing.T) int {
	t.Helper()
	n := 0
	names := f.stream.ConsumerNames(t.Context())
	for range names.Name() {
		n++
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConsoleDecodesEachEventOnce: with idle streams open (watching a
// namespace nothing happens in) and one watching, JQ_EVENTS has one
// consumer for all of them, and each event published is decoded once,
// not once per stream.
func TestConsoleDecodesEachEventOnce(t *testing.T) {
	f := newFrontDoor(t)
	f.cfg.HTTP.MaxWatchesPerCaller = 10
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	before := f.consumers(t)
	const idle, published = 5, 7
	for range idle {
		openConsole(t, srv, "/v1/watch/workloads?namespace=idle")
	}
	watching := openConsole(t, srv, "/v1/watch/workloads?namespace=ns")
	if n := f.consumers(t) - before; n != 1 {
		t.Errorf("%d streams open: %d consumers on %s, want 1", idle+1, n, events.Stream)
	}
	decoded := f.console.decodes.Load()
	last := f.submitN(t, "ns", "w", published)
	got, ok := watching.until(t, last)
	if !ok || len(got) != published {
		t.Fatalf("the watching stream got %v, want %d events up to %d", ids(got), published, last)
	}
	if n := f.console.decodes.Load() - decoded; n != published {
		t.Errorf("%d events with %d streams open: decoded %d times, want %d", published, idle+1, n, published)
	}
}

// TestConsoleSinceDeliversEachEventOnce: a stream that starts at
// ?since=N gets every event after N once, in order, whether N is in the
// hub's ring (served from it, with no consumer of its own) or older
// (read by its own reader up to the ring, then from the hub: N evicted
// from the ring, or from before the hub started), and then
// what happens next; a stream without since gets only what happens next.
func TestConsoleSinceDeliversEachEventOnce(t *testing.T) {
	old := consoleRing
	consoleRing = 4
	t.Cleanup(func() { consoleRing = old })
	f := newFrontDoor(t)
	f.cfg.HTTP.MaxWatchesPerCaller = 10
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	first := f.submitN(t, "ns", "before", 2) // before the hub: only a reader of its own reaches these
	keeper := openConsole(t, srv, "/v1/watch/workloads")
	last := f.submitN(t, "ns", "w", 10)
	if got, ok := keeper.until(t, last); !ok || len(got) != 10 {
		t.Fatalf("the first stream got %v, want the 10 events up to %d", ids(got), last)
	}
	// The ring holds the last 4 events; the hub read 6 more, and the
	// first 2 were published before it started.
	inRing, older, beforeHub := last-2, last-7, first-1
	consumers := f.consumers(t)
	fromRing := openConsole(t, srv, fmt.Sprintf("/v1/watch/workloads?since=%d", inRing))
	if n := f.consumers(t); n != consumers {
		t.Errorf("a stream from the ring made %d consumers, want %d (the hub's)", n, consumers)
	}
	fromOwn := openConsole(t, srv, fmt.Sprintf("/v1/watch/workloads?since=%d", older))
	fromStart := openConsole(t, srv, fmt.Sprintf("/v1/watch/workloads?since=%d", beforeHub))
	now := openConsole(t, srv, "/v1/watch/workloads")
	end := f.submitN(t, "ns", "after", 3)
	for _, tc := range []struct {
		name  string
		c     *consoleClient
		after uint64
	}{
		{"since in the ring", fromRing, inRing},
		{"since older than the ring", fromOwn, older},
		{"since before the hub started", fromStart, beforeHub},
		{"no since", now, last},
	} {
		got, _ := tc.c.until(t, end)
		if diff := cmp.Diff(seqs(tc.after+1, end), ids(got)); diff != "" {
			t.Errorf("%s (after %d): ids (-want,+got):\n%s", tc.name, tc.after, diff)
		}
	}
}

// TestConsoleEndsASlowStream: a stream whose client does not read (its
// writer blocks) is ended once its buffer is full, while another stream
// gets every event; reconnecting with ?since= the last id it got, the
// slow client gets the rest, none twice.
func TestConsoleEndsASlowStream(t *testing.T) {
	oldBuffer, oldWrites := consoleBuffer, consoleWrites
	consoleBuffer = 4
	release, blocked := make(chan struct{}), make(chan struct{}, 1)
	consoleWrites = func(r *http.Request, w io.Writer) io.Writer {
		if r.Header.Get("X-Test-Slow") == "" {
			return w
		}
		return blockingWriter{w: w, blocked: blocked, release: release}
	}
	t.Cleanup(func() { consoleBuffer, consoleWrites = oldBuffer, oldWrites })
	f := newFrontDoor(t)
	f.cfg.HTTP.MaxWatchesPerCaller = 10
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// Before srv.Close, which waits for the blocked stream.
	t.Cleanup(unblock)
	// Where the slow client's console was before it opened the stream.
	start := f.submitN(t, "ns", "start", 1)
	slow := openConsole(t, srv, "/v1/watch/workloads?namespace=ns", "X-Test-Slow", "1")
	fast := openConsole(t, srv, "/v1/watch/workloads?namespace=ns")
	// A blocked stream absorbs at most 1 + 2×consoleBuffer events (one
	// being written, a buffer drained into its batch, a buffer more);
	// the other reads each before the next is published, so that its
	// own buffer never fills.
	var got []frame
	var last uint64
	for i := range 2*consoleBuffer + 2 {
		last = f.submitN(t, "ns", fmt.Sprintf("w%d", i), 1)
		fs, ok := fast.until(t, last)
		if !ok {
			t.Fatalf("beside a blocked stream, the other ended after %v", ids(append(got, fs...)))
		}
		got = append(got, fs...)
	}
	if len(got) != 2*consoleBuffer+2 {
		t.Errorf("beside a blocked stream, the other got %v", ids(got))
	}
	<-blocked
	unblock()
	got, ended := slow.until(t, last)
	if ended {
		t.Fatalf("the blocked stream got every event (%v): it was not ended", ids(got))
	}
	// Its write failed when it was ended (the hub set its deadline):
	// it may have got nothing.
	since := start
	if len(got) > 0 {
		since = got[len(got)-1].id
	}
	again := openConsole(t, srv, fmt.Sprintf("/v1/watch/workloads?namespace=ns&since=%d", since))
	rest, _ := again.until(t, last)
	if diff := cmp.Diff(seqs(start+1, last), append(ids(got), ids(rest)...)); diff != "" {
		t.Errorf("before and after reconnecting at %d: ids (-want,+got):\n%s", since, diff)
	}
}

// blockingWriter blocks an event's write until release is closed,
// saying once on blocked that it blocks.
type blockingWriter struct {
	w       io.Writer
	blocked chan struct{}
	release chan struct{}
}

func (b blockingWriter) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), "id: ") {
		select {
		case b.blocked <- struct{}{}:
		default:
		}
		<-b.release
	}
	return b.w.Write(p)
}

// TestConsolePushesEveryWorkloadEvent: every type of event about a
// workload reaches the console's stream, named by its workload, among
// them a pending workload's deactivation (POST .../active false), which
// the console must see leave the queue.
func TestConsolePushesEveryWorkloadEvent(t *testing.T) {
	f := newFrontDoor(t)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	c := openConsole(t, srv, "/v1/watch/workloads")
	if code, _, body := f.do(t, "POST", "/v1/workloads", nil, nsWorkload("ns", "w")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	if code, _, body := f.do(t, "POST", "/v1/workloads/ns/w/active", nil, `{"active":false}`); code != http.StatusAccepted {
		t.Fatalf("deactivate: %d %s", code, body)
	}
	ref := events.WorkloadRef{Namespace: "ns", Name: "other"}
	data := map[events.Type]any{
		events.WorkloadSubmitted:   &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(`{}`)},
		events.PriorityChanged:     &events.PriorityChangedData{WorkloadRef: ref},
		events.ActiveChanged:       &events.ActiveChangedData{WorkloadRef: ref},
		events.WorkloadDeleted:     &ref,
		events.WorkloadExpired:     &ref,
		events.WorkloadFinished:    &events.WorkloadFinishedData{WorkloadRef: ref},
		events.PodsReady:           &ref,
		events.QuotaReserved:       &events.QuotaReservedData{WorkloadRef: ref},
		events.Inadmissible:        &events.InadmissibleData{WorkloadRef: ref},
		events.PreemptionRequested: &events.PreemptionRequestedData{WorkloadRef: ref},
		events.Evicted:             &events.EvictedData{WorkloadRef: ref, Reason: "Preempted"},
		events.Requeued:            &events.RequeuedData{WorkloadRef: ref, Until: time.Now()},
		events.Deactivated:         &ref,
		events.Placed:              &events.PlacedData{WorkloadRef: ref},
	}
	want := []string{string(events.WorkloadSubmitted) + " ns/w", string(events.ActiveChanged) + " ns/w"}
	var last uint64
	for i, typ := range events.Types() {
		if !strings.HasPrefix(string(typ), "io.jetqueue.workload.") {
			continue
		}
		d, ok := data[typ]
		if !ok {
			t.Errorf("%s is about a workload: add it to this test", typ)
			continue
		}
		subject := events.WorkloadSubject(ref.Namespace, ref.Name)
		if typ == events.Placed {
			subject = events.PlacedSubject(ref.Namespace, ref.Name)
		}
		ev := events.Event{ID: fmt.Sprintf("every-type-%d", i), Type: typ, Source: events.SourceIngest, Time: time.Now(), Subject: subject, Data: d}.FromOwner()
		seq, _, err := bus.Publish(t.Context(), f.js, ev, nil)
		if err != nil {
			t.Fatalf("publish %s: %v", typ, err)
		}
		last = seq
		want = append(want, string(typ)+" ns/other")
	}
	got, _ := c.until(t, last)
	var said []string
	for _, fr := range got {
		if fr.event != "workload" {
			t.Errorf("event %d is %q, want workload", fr.id, fr.event)
		}
		said = append(said, fr.data.Type+" "+fr.data.Namespace+"/"+fr.data.Name)
	}
	if diff := cmp.Diff(want, said); diff != "" {
		t.Errorf("the stream's events (-want,+got):\n%s", diff)
	}
}
