package ingest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// project writes the stream up to seq into the projection, as the
// projector would (none runs in a frontDoor).
func (f *frontDoor) project(t *testing.T, seq uint64) {
	t.Helper()
	f.projectInto(t, f.store, seq)
}

// projectInto is project into st.
func (f *frontDoor) projectInto(t *testing.T, st *store.Store, seq uint64) {
	t.Helper()
	var recs []store.Record
	for n := uint64(1); n <= seq; n++ {
		m, err := f.stream.GetMsg(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Parse(m.Header.Get, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.Record{Seq: n, Event: ev})
	}
	if _, err := st.Apply(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestQueriesWaitForTheirWrite: a query with the sequence a write answered
// is answered only once the projection holds it; until then it waits, and
// past its bound says how far the projection got; bad values are 400s
// naming the parameter.
func TestQueriesWaitForTheirWrite(t *testing.T) {
	f := newFrontDoor(t)
	code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload("w1", "1"))
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sub struct{ Seq uint64 }
	if err := json.Unmarshal(body, &sub); err != nil || sub.Seq != 1 {
		t.Fatalf("submit answered %s, want seq 1 (the stream's first event)", body)
	}

	// Nothing projects here: the query waits out its bound.
	code, _, body = f.do(t, "GET", "/v1/workloads?minSeq=1&minSeqTimeout=50ms", nil, "")
	if code != http.StatusGatewayTimeout || fieldOf(t, body) != "minSeq" || !strings.Contains(string(body), "reached sequence 0, not 1") {
		t.Errorf("query ahead of the projection: %d %s, want 504 naming minSeq and the projection's position", code, body)
	}
	// Without minSeq it answers at once, without the write.
	code, _, body = f.do(t, "GET", "/v1/workloads", nil, "")
	if code != http.StatusOK || !strings.Contains(string(body), `"items":[]`) {
		t.Errorf("plain query: %d %s", code, body)
	}

	// A query in flight is answered once the projection reaches it.
	done := make(chan []byte, 1)
	go func() {
		code, _, body := f.do(t, "GET", "/v1/workloads/ns/w1", map[string]string{HeaderMinSeq: "1"}, "")
		done <- fmt.Appendf(nil, "%d %s", code, body)
	}()
	f.project(t, 1)
	if got := string(<-done); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"name":"w1"`) {
		t.Errorf("query waiting for its write: %s", got)
	}

	for _, c := range []struct {
		path, header, field string
	}{
		{"/v1/workloads?minSeq=2", "", "minSeq"},
		{"/v1/workloads", "9", HeaderMinSeq},
		{"/v1/workloads?minSeq=x", "", "minSeq"},
		{"/v1/workloads", "-1", HeaderMinSeq},
		{"/v1/workloads?minSeq=1", "2", "minSeq"},
		{"/v1/workloads?minSeq=1&minSeqTimeout=1h", "", "minSeqTimeout"},
	} {
		h := map[string]string{}
		if c.header != "" {
			h[HeaderMinSeq] = c.header
		}
		code, _, body := f.do(t, "GET", c.path, h, "")
		if code != http.StatusBadRequest || fieldOf(t, body) != c.field {
			t.Errorf("%s (header %q): %d %s, want 400 naming %s", c.path, c.header, code, body, c.field)
		}
	}
}
