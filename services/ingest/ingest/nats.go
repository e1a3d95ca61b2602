package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// NATS interfaces of API.md. Request/reply subjects answer exactly as the
// HTTP API does (the same handlers serve both); the status travels in the
// reply's Status header.
const (
	SubjectApply     = "jq.api.v1.apply"
	SubjectSubmit    = "jq.api.v1.workloads.submit"
	SubjectFinish    = "jq.api.v1.workloads.finish"
	SubjectPodsReady = "jq.api.v1.workloads.podsready"
	SubjectDelete    = "jq.api.v1.workloads.delete"
	SubjectPriority  = "jq.api.v1.workloads.priority"

	// SubmitStream holds durable, fire-and-forget submissions.
	SubmitStream  = "JQ_SUBMIT"
	SubmitSubject = "jq.submit.>"
	// SubmitType is the CloudEvents type of a durable submission.
	SubmitType = "io.jetqueue.workload.submit.v1"
	// RejectedType is published on jq.rejected.<ce-id token> when a
	// durable submission is invalid.
	RejectedType = "io.jetqueue.workload.rejected.v1"
)

// RejectedSubject is where the rejection of a durable submission goes.
func RejectedSubject(ceID string) string { return "jq.rejected." + events.Token(ceID) }

// serveNATS answers the request/reply subjects in the "ingest" queue group,
// so instances share the load.
func (s *Server) serveNATS(nc *nats.Conn, h http.Handler) ([]*nats.Subscription, error) {
	routes := map[string]func(*nats.Msg) (*http.Request, error){
		SubjectApply:  func(m *nats.Msg) (*http.Request, error) { return newRequest("POST", "/v1/apply", m.Data, m) },
		SubjectSubmit: func(m *nats.Msg) (*http.Request, error) { return newRequest("POST", "/v1/workloads", m.Data, m) },
		SubjectFinish: workloadRequest("POST", "finish"), SubjectPodsReady: workloadRequest("POST", "podsready"),
		SubjectDelete: workloadRequest("DELETE", ""), SubjectPriority: workloadRequest("POST", "priority"),
	}
	var subs []*nats.Subscription
	for subject, build := range routes {
		sub, err := nc.QueueSubscribe(subject, "ingest", func(m *nats.Msg) {
			req, err := build(m)
			rec := httptest.NewRecorder()
			if err != nil {
				s.writeError(rec, nil, fail(http.StatusBadRequest, "", "", err.Error()))
			} else {
				h.ServeHTTP(rec, req)
			}
			reply := nats.NewMsg(m.Reply)
			reply.Header.Set("Status", strconv.Itoa(rec.Code))
			reply.Data = rec.Body.Bytes()
			_ = m.RespondMsg(reply)
		})
		if err != nil {
			return subs, err
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

func newRequest(method, path string, body []byte, m *nats.Msg) (*http.Request, error) {
	req, err := http.NewRequest(method, path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Idempotency-Key", "JQ-Batch"} {
		if v := m.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	return req, nil
}

// workloadRequest maps a body {"namespace","name", ...} to the HTTP path of
// the workload and forwards the remaining fields as the HTTP body.
func workloadRequest(method, verb string) func(*nats.Msg) (*http.Request, error) {
	return func(m *nats.Msg) (*http.Request, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &fields); err != nil {
			return nil, fmt.Errorf("want a JSON object with namespace and name: %v", err)
		}
		var ns, name string
		if json.Unmarshal(fields["namespace"], &ns) != nil || json.Unmarshal(fields["name"], &name) != nil || ns == "" || name == "" {
			return nil, errors.New("namespace and name are required")
		}
		delete(fields, "namespace")
		delete(fields, "name")
		path := "/v1/workloads/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
		if verb != "" {
			path += "/" + verb
		}
		var body []byte
		if len(fields) > 0 {
			body, _ = json.Marshal(fields)
		}
		return newRequest(method, path, body, m)
	}
}

// ensureSubmissions declares JQ_SUBMIT and ingest's consumer on it. Ingest
// does so before it reports ready, so that a submitter who waited for it
// never publishes to a stream that does not exist yet.
func ensureSubmissions(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	st, err := bus.Ensure(ctx, func() (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: SubmitStream, Subjects: []string{SubmitSubject},
			Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 10 * time.Minute,
			Replicas: bus.Replicas(ctx, js)})
	})
	if err != nil {
		return nil, fmt.Errorf("ensure %s: %w", SubmitStream, err)
	}
	return bus.EnsureConsumer(ctx, st, bus.ConsumerOptions{Durable: "ingest", MaxDeliver: -1})
}

// consumeSubmissions drains JQ_SUBMIT: each CloudEvent is submitted as if
// posted with its ce-id as Idempotency-Key; an invalid one is answered on
// jq.rejected.<ce-id token>. A submission stays in the stream until ingest
// has handled it, so none is lost while ingest is down.
func (s *Server) consumeSubmissions(ctx context.Context, c jetstream.Consumer, nc *nats.Conn, h http.Handler) error {
	for ctx.Err() == nil {
		msgs, err := bus.Batch(ctx, c, 256, 200*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// Each submission costs a few round trips to JetStream; handling a
		// batch concurrently keeps the pipeline from waiting on them one
		// by one. Submissions of different workloads are independent.
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for _, m := range msgs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				s.submitDurable(nc, h, m)
			}()
		}
		wg.Wait()
	}
	return nil
}

func (s *Server) submitDurable(nc *nats.Conn, h http.Handler, m jetstream.Msg) {
	id := m.Headers().Get(events.HeaderID)
	rec := httptest.NewRecorder()
	switch typ := m.Headers().Get(events.HeaderType); {
	case id == "":
		s.writeError(rec, nil, fail(http.StatusBadRequest, "", events.HeaderID, "a durable submission needs a ce-id"))
	case typ != SubmitType:
		s.writeError(rec, nil, fail(http.StatusBadRequest, "", events.HeaderType, fmt.Sprintf("want %s, got %q", SubmitType, typ)))
	default:
		req, _ := http.NewRequest("POST", "/v1/workloads", bytes.NewReader(m.Data()))
		req.Header.Set("Idempotency-Key", id)
		h.ServeHTTP(rec, req)
	}
	if rec.Code >= 500 {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if rec.Code >= 400 && id != "" {
		rej := nats.NewMsg(RejectedSubject(id))
		rej.Header.Set(events.HeaderSpecVersion, "1.0")
		rej.Header.Set(events.HeaderID, id+"/rejected")
		rej.Header.Set(events.HeaderType, RejectedType)
		rej.Header.Set(events.HeaderSource, "jetqueue/ingest")
		rej.Header.Set(events.HeaderTime, s.cfg.Now().UTC().Format(time.RFC3339Nano))
		rej.Header.Set("Status", strconv.Itoa(rec.Code))
		rej.Data = rec.Body.Bytes()
		if err := nc.PublishMsg(rej); err != nil {
			s.log.Warn("rejection not published", zap.String("ce-id", id), zap.Error(err))
		}
	}
	_ = m.Ack()
}
