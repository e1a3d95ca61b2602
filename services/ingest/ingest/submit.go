package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// POST /v1/workloads: a submission from the request to the fenced
// publish of its WorkloadSubmitted events.

type submitted struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Seq       uint64 `json:"seq"`
}

// submit accepts one Workload or Job, or several at once (multi-document
// YAML or a List): those are validated together, published together as one
// atomic batch (all or none), and considered by admission in the same
// cycle.
//
// Idempotency is keyed to the body. With an Idempotency-Key, the event id
// derives from the key, so JetStream's dedupe answers a retry with the
// first submission; without one, from the document and its name's position
// in the log. Either way the event records the digest of the document the
// client sent, and the same key or name with another document is 409. A
// different workload under a taken name fails the subject fence: 409.
func (s *Server) submit(r *http.Request) (int, any, error) {
	if err := s.admit(r.Context()); err != nil {
		return 0, nil, err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return 0, nil, err
	}
	objs, err := s.decode(r)
	if err != nil {
		return 0, nil, err
	}
	if len(objs) > bus.MaxAtomic {
		return 0, nil, fail(http.StatusRequestEntityTooLarge, "", "", fmt.Sprintf("%d documents: at most %d per request", len(objs), bus.MaxAtomic))
	}
	// Every document is authorized before any is validated or published:
	// a Workload is create on workloads, a Job create on jobs, in its
	// namespace. A caller who may not create there learns nothing from
	// validation (whether a class or a name exists).
	attrs := make([]rbac.Attributes, 0, len(objs))
	for _, o := range objs {
		a := objectAttributes("create", o)
		a.Name = ""
		attrs = append(attrs, a)
	}
	if err := s.authorize(r, attrs...); err != nil {
		return 0, nil, err
	}
	subs := make([]*submission, 0, len(objs))
	for i, o := range objs {
		sub, err := s.prepare(r.Context(), o, key, i, len(objs))
		if err != nil {
			return 0, nil, err
		}
		subs = append(subs, sub)
	}
	if err := s.explicitPriorities(r, objs, subs); err != nil {
		return 0, nil, err
	}
	if len(subs) == 1 {
		return s.publishSubmission(r.Context(), subs[0])
	}
	return s.publishSubmissions(r.Context(), subs)
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 256

// idempotencyKey reads the Idempotency-Key header: at most
// maxIdempotencyKey bytes of printable ASCII.
func idempotencyKey(r *http.Request) (string, error) {
	k, err := onlyOnce(r.Header.Values("Idempotency-Key"), "Idempotency-Key")
	if err != nil {
		return "", err
	}
	if len(k) > maxIdempotencyKey {
		return "", fail(http.StatusBadRequest, "", "Idempotency-Key", fmt.Sprintf("%d bytes: at most %d", len(k), maxIdempotencyKey))
	}
	if strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", fail(http.StatusBadRequest, "", "Idempotency-Key", "only printable ASCII characters are allowed")
	}
	return k, nil
}

// submission is one validated workload ready to publish.
type submission struct {
	wl *api.Workload
	// id is the event's id; keyed says it derives from an Idempotency-Key;
	// doc is the digest of the document the client sent.
	id      string
	keyed   bool
	doc     string
	subject string
	// seq and prev are the subject's last event, as far as known: located
	// says they were read, else the subject is assumed empty.
	seq     uint64
	prev    *events.Event
	located bool
	// derivedUID says the UID is derived from the id (the client gave
	// none).
	derivedUID bool
}

// prepare validates (and converts) one submitted object and derives its
// event id: from the key (and its place in a multi-document request), else
// from the document and its subject's position, so that the same workload
// submitted again after its deletion is a new event rather than a
// duplicate JetStream would drop. It does not read the position: it
// assumes the subject empty, as it is for nearly every submission, and
// publishSubmission learns otherwise from the fence and calls locate.
func (s *Server) prepare(ctx context.Context, o api.Object, key string, index, count int) (*submission, error) {
	if err := api.Validate(o); err != nil {
		return nil, invalid(err)
	}
	doc, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	wl, err := s.toWorkload(ctx, o)
	if err != nil {
		return nil, err
	}
	sub := &submission{wl: wl, doc: digest("document", string(doc)), keyed: key != "", derivedUID: wl.UID == "" || !keepsUID(ctx)}
	if sub.keyed {
		sub.id = digest("submit-key", wl.Namespace, key)
		if count > 1 {
			sub.id = digest(sub.id, strconv.Itoa(index))
		}
	}
	if wl.Name == "" {
		// A retry under the same key gets the same name.
		suffix := strings.ToLower(nuid.Next()[17:])
		if sub.keyed {
			suffix = sub.id[:5]
		}
		wl.Name = wl.GenerateName + suffix
	}
	if err := api.Validate(wl); err != nil {
		return nil, invalid(err)
	}
	sub.subject = events.WorkloadSubject(wl.Namespace, wl.Name)
	sub.at(0, nil)
	return sub, nil
}

// locate reads the submission's subject's position, and derives again
// what depends on it.
func (s *Server) locate(ctx context.Context, sub *submission) error {
	seq, prev, err := s.last(ctx, sub.subject)
	if err != nil {
		return err
	}
	sub.at(seq, prev)
	sub.located = true
	return nil
}

// at places the submission after the subject's last event prev (at seq; 0
// and nil for an empty subject): an unkeyed id, and the UID derived from
// the id, depend on it.
func (sub *submission) at(seq uint64, prev *events.Event) {
	sub.seq, sub.prev = seq, prev
	wl := sub.wl
	if !sub.keyed {
		sub.id = digest("submit", wl.Namespace, wl.Name, sub.doc, strconv.FormatUint(seq, 10))
	}
	if sub.derivedUID {
		wl.UID = types.UID(uidFrom(sub.id))
	}
}

// toWorkload returns a submitted Workload, or the Workload of a Job, with
// the priority its classes derive (priority.go).
func (s *Server) toWorkload(ctx context.Context, o api.Object) (*api.Workload, error) {
	switch o := o.(type) {
	case *api.Workload:
		return s.classPriority(ctx, o)
	case *api.Job:
		return s.jobWorkload(ctx, o)
	}
	return nil, fail(http.StatusBadRequest, api.ObjectRef(o), "kind", "only Workload and batch/v1 Job can be submitted")
}

// fresh says whether the submission's name is free: its subject is empty
// or ends in a deletion or expiry. It returns the fence to publish at.
func (sub *submission) fresh() (expect uint64, ok bool) {
	switch {
	case sub.prev == nil:
		return 0, true
	case events.Ends(sub.prev.Type):
		return sub.seq, true
	}
	return 0, false
}

// submittedEvent is the WorkloadSubmitted of a submission.
func (s *Server) submittedEvent(sub *submission, batch *events.Batch) events.Event {
	wl := sub.wl
	raw, _ := json.Marshal(wl)
	ev := s.event(events.WorkloadSubmitted, sub.subject, &events.WorkloadSubmittedData{
		WorkloadRef: events.WorkloadRef{Namespace: wl.Namespace, Name: wl.Name}, Workload: raw,
		CreatedAt: s.createdAt(), RequestDigest: sub.doc})
	ev.ID, ev.Batch = sub.id, batch
	return ev
}

// publishSubmission publishes one workload, fenced on its subject. It
// first publishes as if the subject were empty (one round trip, not two):
// the fence stores the event only if it is, and then this is exactly what
// a publish after reading the subject would have stored. When the fence
// fails, or JetStream holds the event already, nothing was stored, and
// the submission is published as read from the subject.
func (s *Server) publishSubmission(ctx context.Context, sub *submission) (int, any, error) {
	if !sub.located {
		var empty uint64
		got, dup, err := bus.Publish(ctx, s.js, s.submittedEvent(sub, nil), &empty)
		switch {
		case err == nil && !dup:
			return http.StatusAccepted, submitted{Namespace: sub.wl.Namespace, Name: sub.wl.Name, UID: string(sub.wl.UID), Seq: got}, nil
		case err != nil && !errors.Is(err, bus.ErrConflict):
			return 0, nil, err
		}
		if err := s.locate(ctx, sub); err != nil {
			return 0, nil, err
		}
	}
	expect, ok := sub.fresh()
	if !ok {
		return s.resubmitted(ctx, sub)
	}
	got, dup, err := bus.Publish(ctx, s.js, s.submittedEvent(sub, nil), &expect)
	if errors.Is(err, bus.ErrConflict) {
		return 0, nil, nameTaken(sub.wl)
	}
	if err != nil {
		return 0, nil, err
	}
	if dup {
		code, ans, err := s.duplicate(ctx, sub, got)
		if !errors.Is(err, errOriginalGone) {
			return code, ans, err
		}
		// The event JetStream deduplicated it against was purged (its
		// workload ended and the log's retention dropped it within the
		// duplicate window): this is a new submission. Its fence still
		// makes it the only one under the name.
		ev := s.submittedEvent(sub, nil)
		ev.ID = digest(sub.id, "after-purge", nuid.Next())
		if got, _, err = bus.Publish(ctx, s.js, ev, &expect); errors.Is(err, bus.ErrConflict) {
			return 0, nil, nameTaken(sub.wl)
		} else if err != nil {
			return 0, nil, err
		}
	}
	return http.StatusAccepted, submitted{Namespace: sub.wl.Namespace, Name: sub.wl.Name, UID: string(sub.wl.UID), Seq: got}, nil
}

// publishSubmissions publishes the workloads of a multi-document request
// whose names are free as one atomic batch, and answers the others as
// resubmissions. If any of the batch cannot be stored (a name taken
// meanwhile, an event JetStream already holds), none is.
func (s *Server) publishSubmissions(ctx context.Context, subs []*submission) (int, any, error) {
	for _, sub := range subs {
		if err := s.locate(ctx, sub); err != nil {
			return 0, nil, err
		}
	}
	answers := make([]submitted, len(subs))
	var fresh []int
	var writes []bus.Write
	for i, sub := range subs {
		expect, ok := sub.fresh()
		if !ok {
			_, ans, err := s.resubmitted(ctx, sub)
			if err != nil {
				return 0, nil, err
			}
			answers[i] = ans.(submitted)
			continue
		}
		fresh = append(fresh, i)
		writes = append(writes, bus.Write{ExpectLast: &expect})
	}
	if len(fresh) == 0 {
		return http.StatusOK, map[string]any{"items": answers}, nil
	}
	batch := &events.Batch{ID: nuid.Next(), Size: len(fresh)}
	for k, i := range fresh {
		writes[k].Event = s.submittedEvent(subs[i], batch)
	}
	seqs, err := bus.PublishAtomic(ctx, s.js, writes)
	switch {
	case errors.Is(err, bus.ErrConflict):
		return 0, nil, fail(http.StatusConflict, "", "metadata.name",
			"a workload of this request was submitted or deleted meanwhile; nothing was submitted; submit again")
	case errors.Is(err, bus.ErrDuplicateInBatch):
		return 0, nil, fail(http.StatusConflict, "", "Idempotency-Key",
			"part of this request was already submitted under this key (within "+bus.DefaultDuplicates.String()+"); nothing was submitted")
	case err != nil:
		return 0, nil, err
	}
	for k, i := range fresh {
		wl := subs[i].wl
		answers[i] = submitted{Namespace: wl.Namespace, Name: wl.Name, UID: string(wl.UID), Seq: seqs[k]}
	}
	return http.StatusAccepted, map[string]any{"items": answers}, nil
}

// errOriginalGone means the event a publish was deduplicated against is
// no longer in the stream.
var errOriginalGone = errors.New("the original of a deduplicated event was purged")

// duplicate answers a submission JetStream dropped as a duplicate of the
// event at seq: the first submission's answer if it is the same document
// (a retry), else 409 naming the key reused for another document.
func (s *Server) duplicate(ctx context.Context, sub *submission, seq uint64) (int, any, error) {
	m, err := s.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, errOriginalGone
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read the submission at %d: %w", seq, err)
	}
	ev, err := events.Parse(m.Header.Get, m.Data)
	if err != nil {
		return 0, nil, fmt.Errorf("read the submission at %d: %w", seq, err)
	}
	first, ok := ev.Data.(*events.WorkloadSubmittedData)
	if !ok {
		return 0, nil, fmt.Errorf("event %s at %d is a %s, not a submission", ev.ID, seq, ev.Type)
	}
	if !sameDocument(first, sub) {
		return 0, nil, keyReused(sub.wl)
	}
	return http.StatusOK, answer(first, seq), nil
}

// resubmitted answers a submission under a name that is taken: the same
// answer as before if it is the same submission (same document, and the
// same Idempotency-Key if one was given), else 409.
func (s *Server) resubmitted(ctx context.Context, sub *submission) (int, any, error) {
	cur, curSeq, err := s.currentSubmission(ctx, sub.subject)
	if err != nil {
		return 0, nil, err
	}
	switch {
	case cur == nil, sub.keyed && cur.ID != sub.id:
		return 0, nil, nameTaken(sub.wl)
	case !sameDocument(cur.Data.(*events.WorkloadSubmittedData), sub) && sub.keyed:
		return 0, nil, keyReused(sub.wl)
	case !sameDocument(cur.Data.(*events.WorkloadSubmittedData), sub):
		return 0, nil, nameTaken(sub.wl)
	}
	return http.StatusOK, answer(cur.Data.(*events.WorkloadSubmittedData), curSeq), nil
}

// currentSubmission is the WorkloadSubmitted of the workload living on a
// subject, and its sequence; nil when the last one was deleted.
func (s *Server) currentSubmission(ctx context.Context, subject string) (*events.Event, uint64, error) {
	var cur *events.Event
	var curSeq uint64
	for next := uint64(1); ; {
		m, err := s.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return cur, curSeq, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if ev, err := events.Parse(m.Header.Get, m.Data); err == nil {
			switch ev.Type {
			case events.WorkloadSubmitted:
				cur, curSeq = &ev, m.Sequence
			case events.WorkloadDeleted, events.WorkloadExpired:
				cur = nil
			}
		}
		next = m.Sequence + 1
	}
}

// sameDocument says whether a stored submission is of the document the
// client sent now. Of a submission stored before documents had digests,
// only its key is known: the same key counts as the same submission (its
// id was checked), and without a key nothing proves it.
func sameDocument(stored *events.WorkloadSubmittedData, sub *submission) bool {
	if stored.RequestDigest == "" {
		return sub.keyed
	}
	return stored.RequestDigest == sub.doc
}

func answer(d *events.WorkloadSubmittedData, seq uint64) submitted {
	var wl api.Workload
	_ = json.Unmarshal(d.Workload, &wl)
	return submitted{Namespace: d.Namespace, Name: d.Name, UID: string(wl.UID), Seq: seq}
}

func nameTaken(wl *api.Workload) error {
	return fail(http.StatusConflict, "Workload/"+wl.Namespace+"/"+wl.Name, "metadata.name", "a different workload with this name exists")
}

func keyReused(wl *api.Workload) error {
	return fail(http.StatusConflict, "Workload/"+wl.Namespace+"/"+wl.Name, "Idempotency-Key",
		"this key was used for a different document; a key is remembered while its workload lives, and for "+
			bus.DefaultDuplicates.String()+" (JQ_EVENTS' duplicate window) under any name")
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

func uidFrom(id string) string {
	return id[0:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32]
}
