package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// TestDurableSubmitReusingACeIDIsRejected: a durable submission is keyed by
// its ce-id; another document under a ce-id already used (published
// without Nats-Msg-Id, so JQ_SUBMIT does not drop it first) is rejected on
// jq.rejected.<namespace>.<ce-id token> with 409 naming Idempotency-Key, and only the
// first workload is ever in the log.
func TestDurableSubmitReusingACeIDIsRejected(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	nc := s.natsConn()
	rejected, err := nc.SubscribeSync(ingest.RejectedSubject("ns", "reused"))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(body []byte) {
		m := nats.NewMsg(ingest.SubmitSubjectOf("ns", "reused"))
		m.Header.Set(events.HeaderSpecVersion, "1.0")
		m.Header.Set(events.HeaderID, "reused")
		m.Header.Set(events.HeaderType, ingest.SubmitType)
		m.Header.Set(events.HeaderSource, "test")
		m.Data = body
		reply, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil || strings.Contains(string(reply.Data), `"error"`) {
			t.Fatalf("publish to %s: %v %s", ingest.SubmitStream, err, reply.Data)
		}
	}
	publish(cpuWorkload("first"))
	// Ingest handles a fetch of submissions concurrently: the first must
	// be in the log before the others arrive, or either could win.
	testenv.Eventually(t, "the first submission in the log", 15*time.Second, func() error {
		if s.eventsPerWorkload(events.WorkloadSubmitted)["ns/first"] != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	publish(cpuWorkload("first")) // a retry: accepted again, published once
	publish(cpuWorkload("second"))
	msg, err := rejected.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	var body errorBody
	if msg.Header.Get("Status") != "409" || json.Unmarshal(msg.Data, &body) != nil || len(body.Errors) != 1 ||
		body.Errors[0].Field != "Idempotency-Key" {
		t.Fatalf("rejection: status %s %s, want 409 on Idempotency-Key", msg.Header.Get("Status"), msg.Data)
	}
	s.sync()
	if more, err := rejected.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("a second rejection: %s", more.Data)
	}
	subs := s.eventsPerWorkload(events.WorkloadSubmitted)
	if len(subs) != 1 || subs["ns/first"] != 1 {
		t.Errorf("submissions in the log %v, want ns/first once", subs)
	}
}

// TestNATSRequestReplyBoundsJQBatch: the NATS API refuses an oversized or
// malformed JQ-Batch as HTTP does, before anything is published.
func TestNATSRequestReplyBoundsJQBatch(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("w"))
	s.sync()
	before := s.streamLen()
	nc := s.natsConn()
	for _, v := range []string{"evil/1000000", "bad id/2"} {
		m := nats.NewMsg(ingest.SubjectFinish)
		m.Header.Set("JQ-Batch", v)
		m.Data = []byte(`{"namespace":"ns","name":"w"}`)
		reply, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		if reply.Header.Get("Status") != "400" || json.Unmarshal(reply.Data, &body) != nil || len(body.Errors) != 1 ||
			body.Errors[0].Field != "JQ-Batch" {
			t.Errorf("JQ-Batch %q: status %s %s, want 400 on JQ-Batch", v, reply.Header.Get("Status"), reply.Data)
		}
	}
	if after := s.streamLen(); after != before {
		t.Errorf("refused requests published %d events", after-before)
	}
}
