package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// TestFullSubmitStreamRefusesBytesNotDrops: JQ_SUBMIT holds at most
// --submit-max-bytes of waiting submissions. With ingest down, a
// submission that would take the stream past it is refused to its
// submitter (a JetStream error, not a silent drop) while the message
// limit is far off; a smaller one still fits; every acknowledged
// submission is submitted once ingest is back, the refused one is not,
// and it is taken when sent again into the drained stream.
func TestFullSubmitStreamRefusesBytesNotDrops(t *testing.T) {
	const maxBytes = 4096
	srv := testenv.NATS(t)
	s := &system{t: t, nats: srv.ClientURL(), db: testenv.Postgres(t), submit: &ingest.SubmitLimits{MaxMsgs: 1000, MaxBytes: maxBytes}}
	t.Cleanup(s.close)
	s.stopAdmission = s.startAdmission("a")
	s.stopIngest = s.startIngest()
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	s.stopIngest()
	nc := s.natsConn()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, ingest.SubmitStream)
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() jetstream.StreamState {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}
	// publish sends a durable submission whose workload carries pad bytes
	// of annotation.
	publish := func(name string, pad int) error {
		m := nats.NewMsg(ingest.SubmitSubjectOf("ns", name))
		m.Header.Set(events.HeaderSpecVersion, "1.0")
		m.Header.Set(events.HeaderID, name)
		m.Header.Set(events.HeaderType, ingest.SubmitType)
		m.Header.Set(events.HeaderSource, "test")
		m.Data = fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":"ns","annotations":{"pad":%q}},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`,
			name, strings.Repeat("x", pad))
		_, err := js.PublishMsg(ctx, m)
		return err
	}
	for i := range 3 {
		if err := publish(fmt.Sprintf("small-%d", i), 0); err != nil {
			t.Fatalf("small submission %d refused: %v", i, err)
		}
	}
	used := waiting().Bytes
	// Its body alone is the room left: with subject and headers it does
	// not fit, though it would in an empty stream.
	pad := int(maxBytes - used)
	if used == 0 || used > maxBytes/2 {
		t.Fatalf("three small submissions take %d bytes of %d", used, maxBytes)
	}
	err = publish("big", pad)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsStreamStoreFailed {
		t.Fatalf("a submission past --submit-max-bytes: %v, want JetStream's refusal (error code %d)", err, jsStreamStoreFailed)
	}
	if got := waiting(); got.Msgs != 3 || got.Bytes != used {
		t.Errorf("JQ_SUBMIT after the refusal: %d messages, %d bytes; want 3, %d", got.Msgs, got.Bytes, used)
	}
	if err := publish("small-3", 0); err != nil {
		t.Fatalf("a small submission after the refusal: %v", err)
	}
	s.startIngest()
	want := map[string]int{"ns/small-0": 1, "ns/small-1": 1, "ns/small-2": 1, "ns/small-3": 1}
	poll(t, "the four taken submissions in the log", func() error {
		if got := s.eventsPerWorkload(events.WorkloadSubmitted); !maps.Equal(got, want) {
			return fmt.Errorf("submitted %v, want %v", got, want)
		}
		return nil
	})
	poll(t, "JQ_SUBMIT drained", func() error {
		if got := waiting(); got.Msgs != 0 {
			return fmt.Errorf("%d waiting", got.Msgs)
		}
		return nil
	})
	// The submitter, told, sends it again: the drained stream takes it.
	if err := publish("big", pad); err != nil {
		t.Fatalf("the refused submission sent again into the drained stream: %v", err)
	}
	want["ns/big"] = 1
	poll(t, "the resent submission in the log", func() error {
		if got := s.eventsPerWorkload(events.WorkloadSubmitted); !maps.Equal(got, want) {
			return fmt.Errorf("submitted %v, want %v", got, want)
		}
		return nil
	})
}

// jsStreamStoreFailed is nats-server's JSStreamStoreFailedF, its answer to
// a publish that a DiscardNew stream's limits refuse.
const jsStreamStoreFailed jetstream.ErrorCode = 10077
