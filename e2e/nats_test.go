package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

func (s *system) natsConn() *nats.Conn {
	s.t.Helper()
	nc, err := bus.Connect(s.nats, "client")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// request sends a request/reply call and returns the status and body.
func request(t *testing.T, nc *nats.Conn, subject string, body []byte) (int, []byte) {
	t.Helper()
	msg, err := nc.Request(subject, body, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	code, err := strconv.Atoi(msg.Header.Get("Status"))
	if err != nil {
		t.Fatalf("%s: no Status header", subject)
	}
	return code, msg.Data
}

// TestNATSRequestReplyAnswersLikeHTTP: the request/reply subjects give the
// HTTP API's statuses and bodies.
func TestNATSRequestReplyAnswersLikeHTTP(t *testing.T) {
	s := start(t)
	nc := s.natsConn()
	if code, body := request(t, nc, ingest.SubjectApply, []byte(restartWorld)); code != http.StatusOK || !strings.Contains(string(body), `"applied"`) {
		t.Fatalf("apply: %d %s", code, body)
	}
	if code, body := request(t, nc, ingest.SubjectApply, []byte("kind: [")); code != http.StatusBadRequest || !strings.Contains(string(body), `"errors"`) {
		t.Fatalf("bad apply: %d %s", code, body)
	}
	if code, body := request(t, nc, ingest.SubjectSubmit, cpuWorkload("w")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	if code, _ := request(t, nc, ingest.SubjectSubmit, cpuWorkload("w")); code != http.StatusOK {
		t.Fatalf("identical resubmit: %d", code)
	}
	if code, _ := request(t, nc, ingest.SubjectFinish, []byte(`{"namespace":"ns","name":"ghost"}`)); code != http.StatusNotFound {
		t.Fatalf("finish unknown: %d", code)
	}
	if code, _ := request(t, nc, ingest.SubjectPriority, []byte(`{"namespace":"ns","name":"w","priority":5}`)); code != http.StatusAccepted {
		t.Fatalf("priority: %d", code)
	}
	if code, _ := request(t, nc, ingest.SubjectFinish, []byte(`{"namespace":"ns","name":"w","succeeded":true}`)); code != http.StatusAccepted {
		t.Fatalf("finish: %d", code)
	}
	s.sync()
	for _, v := range s.workloads() {
		if v.Name == "w" && v.Status != "finished" {
			t.Errorf("w is %s, want finished", v.Status)
		}
	}
}

// TestDurableSubmitIsNeverLost: every submission published to JQ_SUBMIT
// while ingest is down reaches the log exactly once, although ingest is
// restarted while it works through them; an event published twice (a
// submitter's retry) is one submission; an invalid one is answered on
// jq.rejected.<namespace>.<ce-id token> with the HTTP error body.
func TestDurableSubmitIsNeverLost(t *testing.T) {
	const n = 200
	s := start(t)
	nc := s.natsConn()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A submitter may publish as soon as ingest is ready.
	if _, err := js.Stream(ctx, ingest.SubmitStream); err != nil {
		t.Fatalf("ingest is ready but %s is not there: %v", ingest.SubmitStream, err)
	}
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	s.stopIngest()
	rejected, err := nc.SubscribeSync(ingest.RejectedSubject("ns", "bad-1"))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id string, body []byte) {
		m := nats.NewMsg(ingest.SubmitSubjectOf("ns", id))
		m.Header.Set(events.HeaderSpecVersion, "1.0")
		m.Header.Set(events.HeaderID, id)
		m.Header.Set(events.HeaderType, ingest.SubmitType)
		m.Header.Set(events.HeaderSource, "test")
		m.Header.Set("Nats-Msg-Id", id)
		m.Data = body
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		publish(fmt.Sprintf("ok-%d", i), cpuWorkload(fmt.Sprintf("durable-%03d", i)))
		if i == 0 {
			publish("ok-0", cpuWorkload("durable-000")) // a retry of the same event
		}
	}
	publish("bad-1", []byte(`{"kind":"Workload"}`))

	// Ingest goes down again while it works through the backlog: what it
	// took but had not acknowledged is delivered again to the next one.
	stop := s.startIngest()
	poll(t, "ingest working through the backlog", func() error {
		if got := total(s.eventsPerWorkload(events.WorkloadSubmitted)); got == 0 {
			return fmt.Errorf("nothing submitted yet")
		}
		return nil
	})
	stop()
	s.startIngest()

	msg, err := rejected.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	var body struct {
		Errors []json.RawMessage `json:"errors"`
	}
	if msg.Header.Get(events.HeaderType) != ingest.RejectedType || json.Unmarshal(msg.Data, &body) != nil || len(body.Errors) == 0 {
		t.Errorf("rejection %v %s", msg.Header, msg.Data)
	}
	poll(t, "every durable submission in the log", func() error {
		if got := len(s.eventsPerWorkload(events.WorkloadSubmitted)); got != n {
			return fmt.Errorf("%d of %d workloads submitted", got, n)
		}
		return nil
	})
	s.sync()
	submitted := s.eventsPerWorkload(events.WorkloadSubmitted)
	if got := total(submitted); got != n || len(submitted) != n {
		t.Errorf("%d WorkloadSubmitted events for %d workloads, want %d for %d", got, len(submitted), n, n)
	}
	for i := range n {
		if k := fmt.Sprintf("ns/durable-%03d", i); submitted[k] != 1 {
			t.Errorf("%s submitted %d times, want once", k, submitted[k])
		}
	}
}

// TestFullSubmitStreamRefusesNotDrops: JQ_SUBMIT holds at most
// --submit-max-msgs waiting submissions. With ingest down and the stream
// full, a publish is refused (the submitter knows it was not taken);
// every submission JetStream acknowledged is submitted once ingest is
// back, and the stream is empty again.
func TestFullSubmitStreamRefusesNotDrops(t *testing.T) {
	srv := testenv.NATS(t)
	s := &system{t: t, nats: srv.ClientURL(), db: testenv.Postgres(t), submit: &ingest.SubmitLimits{MaxMsgs: 3, MaxBytes: 1 << 20}}
	t.Cleanup(s.close)
	s.stopAdmission = s.startAdmission("a")
	s.stopIngest = s.startIngest()
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	s.stopIngest()
	nc := s.natsConn()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish := func(i int) error {
		id := fmt.Sprintf("full-%d", i)
		m := nats.NewMsg(ingest.SubmitSubjectOf("ns", id))
		m.Header.Set(events.HeaderSpecVersion, "1.0")
		m.Header.Set(events.HeaderID, id)
		m.Header.Set(events.HeaderType, ingest.SubmitType)
		m.Header.Set(events.HeaderSource, "test")
		m.Data = cpuWorkload(fmt.Sprintf("full-%d", i))
		_, err := js.PublishMsg(ctx, m)
		return err
	}
	for i := range 3 {
		if err := publish(i); err != nil {
			t.Fatalf("submission %d of 3 refused: %v", i, err)
		}
	}
	if err := publish(3); err == nil {
		t.Fatal("a fourth submission was taken by a JQ_SUBMIT limited to 3")
	}
	s.startIngest()
	poll(t, "the three taken submissions in the log", func() error {
		if got := s.eventsPerWorkload(events.WorkloadSubmitted); len(got) != 3 {
			return fmt.Errorf("%d of 3 submitted: %v", len(got), got)
		}
		return nil
	})
	st, err := js.Stream(ctx, ingest.SubmitStream)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "JQ_SUBMIT drained", func() error {
		info, err := st.Info(ctx)
		if err != nil || info.State.Msgs != 0 {
			return fmt.Errorf("%v waiting (%v)", info.State.Msgs, err)
		}
		return nil
	})
	if got := s.eventsPerWorkload(events.WorkloadSubmitted)["ns/full-3"]; got != 0 {
		t.Errorf("the refused submission is in the log %d times", got)
	}
}
