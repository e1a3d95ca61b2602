package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestDefaultSubmitLimitsShareTheStream: with the defaults, one
// namespace's waiting submissions, each as large as the stream takes,
// fill at most a quarter of JQ_SUBMIT's bytes and messages.
func TestDefaultSubmitLimitsShareTheStream(t *testing.T) {
	l := DefaultSubmitLimits
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if worst := l.MaxMsgsPerNamespace * l.MaxMsgSize; worst > l.MaxBytes/4 {
		t.Errorf("one namespace may hold %d bytes of JQ_SUBMIT's %d", worst, l.MaxBytes)
	}
	if l.MaxMsgsPerNamespace > l.MaxMsgs/4 {
		t.Errorf("one namespace may hold %d submissions of JQ_SUBMIT's %d", l.MaxMsgsPerNamespace, l.MaxMsgs)
	}
	if got := (SubmitLimits{MaxMsgs: 3, MaxBytes: 10}).withDefaults(); got.MaxMsgsPerNamespace != l.MaxMsgsPerNamespace || got.MaxMsgSize != l.MaxMsgSize {
		t.Errorf("a literal without per-namespace limits gets %+v, want the defaults'", got)
	}
}

// TestSubmitStreamBoundsEachNamespace runs JQ_SUBMIT's configuration on
// a real JetStream, nobody consuming (ingest down): namespace a fills its
// share through as many subjects as it likes and is refused with
// JetStream's retryable error; namespace b's submissions are still taken;
// an oversized one is refused at the door; a subject deeper than
// jq.submit.<namespace>.<token> is stored nowhere.
func TestSubmitStreamBoundsEachNamespace(t *testing.T) {
	const perNS, size = 5, 2048
	nc, err := nats.Connect(testenv.NATS(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// An existing JQ_SUBMIT of the previous layout (one subject
	// wildcard, no per-namespace limit) is updated in place.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: SubmitStream, Subjects: []string{"jq.submit.>"},
		Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew, MaxMsgs: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureSubmissions(ctx, js, SubmitLimits{MaxMsgs: 100, MaxBytes: 1 << 20, MaxMsgsPerNamespace: perNS, MaxMsgSize: size}); err != nil {
		t.Fatal(err)
	}
	publish := func(subject string, body []byte) error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m := nats.NewMsg(subject)
		m.Header.Set("ce-id", subject)
		m.Data = body
		_, err := js.PublishMsg(pctx, m)
		return err
	}
	small := []byte(`{"kind":"Workload"}`)
	// Each submission on its own subject, as publishers name them.
	for i := range perNS {
		if err := publish(SubmitSubjectOf("a", strings.Repeat("x", i+1)), small); err != nil {
			t.Fatalf("a's submission %d of %d: %v", i+1, perNS, err)
		}
	}
	err = publish(SubmitSubjectOf("a", "one-more"), small)
	if !SubmitRefusedRetryable(err) {
		t.Errorf("a's submission past its limit: %v, want JetStream's refusal %d", err, CodeSubmitFull)
	}
	if err := publish("jq.submit.a", small); !SubmitRefusedRetryable(err) {
		t.Errorf("a's submission on jq.submit.a past its limit: %v, want a refusal", err)
	}
	if err := publish(SubmitSubjectOf("b", "y"), small); err != nil {
		t.Errorf("b's submission while a is full: %v", err)
	}
	var apiErr *jetstream.APIError
	if err := publish(SubmitSubjectOf("b", "big"), make([]byte, size)); !errors.As(err, &apiErr) || apiErr.ErrorCode != CodeSubmitTooLarge {
		t.Errorf("a submission of %d bytes: %v, want JetStream's refusal %d", size, err, CodeSubmitTooLarge)
	}
	if err := publish("jq.submit.b.deeper.token", small); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("a submission on a deeper subject: %v, want no stream", err)
	}
	st, err := js.Stream(ctx, SubmitStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("jq.submit.>"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"jq.submit.a": perNS, "jq.submit.b": 1}
	if len(info.State.Subjects) != len(want) || info.State.Subjects["jq.submit.a"] != perNS || info.State.Subjects["jq.submit.b"] != 1 {
		t.Errorf("JQ_SUBMIT holds %v, want %v", info.State.Subjects, want)
	}
}
