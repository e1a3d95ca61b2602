// Package events is the catalog of everything that happens in jetqueue:
// the event types, their versioned JSON payloads, the subjects they are
// published on and the stream that orders them. One place, so that the
// services, the projector and the tests agree.
//
// The workload state machine the events describe:
//
//	              WorkloadSubmitted
//	                     │
//	                     ▼
//	┌───────────────▶ pending ◀──────────────┐ Requeued (backoff over)
//	│                 │  │  ▲ Inadmissible   │
//	│   QuotaReserved │  │  └─(reason)       │
//	│                 ▼  │                   │
//	│             admitted ──Evicted─────────┘ (Preempted: at once;
//	│              │  │  │                      PodsReadyTimeout: after backoff)
//	│    PodsReady │  │  └──Deactivated──▶ inactive (backoffLimitCount spent)
//	│              ▼  │
//	│    (ready)──────┴──WorkloadFinished──▶ finished
//	│
//	└── PriorityChanged (any non-final state); WorkloadDeleted ends any state.
//
// WorkloadExpired ends a finished workload once the log's retention has
// passed (libs/retention): every decider forgets it as if deleted, its
// name is free again, and the projection keeps it as finished history.
//
// ActiveChanged is spec.active set by a user (jqctl stop|resume workload):
// false takes a pending or admitted workload to inactive (an admitted one
// leaves its quota), and is Kueue's eviction with reason InactiveWorkload;
// true puts an inactive workload back in its queue. A WorkloadSubmitted
// whose spec.active is false is that eviction too: Kueue's workload
// controller marks any workload it finds inactive evicted. Every consumer
// applies both as it reads them; no Evicted event is published for them.
//
// Config events (ConfigApplied, ConfigDeleted) share the stream, so that
// replaying JQ_EVENTS from the start rebuilds every decision in order.
package events

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Stream is the one totally ordered stream of config and workload events.
const Stream = "JQ_EVENTS"

// SubjectRoot prefixes every event subject.
const SubjectRoot = "jq.ev"

// Subjects the stream captures.
var StreamSubjects = []string{SubjectRoot + ".>"}

// Token encodes a user string as one subject token: names may hold dots,
// and subjects must never carry raw user input. Base64url without padding
// uses only letters, digits, '-' and '_'; the empty string becomes "~".
func Token(s string) string {
	if s == "" {
		return "~"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// ParseToken reverses Token.
func ParseToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", fmt.Errorf("subject token %q: %w", tok, err)
	}
	return string(b), nil
}

// WorkloadSubject is the subject of every event about one workload, so
// that its history is one subject and its writers can be fenced on it.
func WorkloadSubject(namespace, name string) string {
	return strings.Join([]string{SubjectRoot, "wl", Token(namespace), Token(name)}, ".")
}

// IsWorkloadSubject says whether subject is a WorkloadSubject: the
// subjects writers fence on, and the only ones whose positions the
// deciders keep.
func IsWorkloadSubject(subject string) bool {
	return strings.HasPrefix(subject, SubjectRoot+".wl.")
}

// PlacedSubject is where the scorer's advice about a workload goes. It is
// not the workload's subject: a placement is not a state transition, and
// must not move the sequence that the workload's writers fence on.
func PlacedSubject(namespace, name string) string {
	return strings.Join([]string{SubjectRoot, "placed", Token(namespace), Token(name)}, ".")
}

// BatchSubject carries batch bookkeeping (BatchSkipped, BatchClosed), which is about no
// workload and must not move any workload's sequence.
const BatchSubject = SubjectRoot + ".batch"

// ShardSubject carries admission's handovers between shards
// (ShardReleased), which are about no workload.
const ShardSubject = SubjectRoot + ".shard"

// ConfigSubject is the subject of one configuration object.
func ConfigSubject(kind, namespace, name string) string {
	return strings.Join([]string{SubjectRoot, "cfg", Token(kind), Token(namespace), Token(name)}, ".")
}

// Type is a CloudEvents type; the suffix is the payload version.
type Type string

const (
	ConfigApplied       Type = "io.jetqueue.config.applied.v1"
	ConfigDeleted       Type = "io.jetqueue.config.deleted.v1"
	WorkloadSubmitted   Type = "io.jetqueue.workload.submitted.v1"
	PriorityChanged     Type = "io.jetqueue.workload.prioritychanged.v1"
	ActiveChanged       Type = "io.jetqueue.workload.activechanged.v1"
	WorkloadDeleted     Type = "io.jetqueue.workload.deleted.v1"
	WorkloadExpired     Type = "io.jetqueue.workload.expired.v1"
	WorkloadFinished    Type = "io.jetqueue.workload.finished.v1"
	PodsReady           Type = "io.jetqueue.workload.podsready.v1"
	QuotaReserved       Type = "io.jetqueue.workload.quotareserved.v1"
	Inadmissible        Type = "io.jetqueue.workload.inadmissible.v1"
	PreemptionRequested Type = "io.jetqueue.workload.preemptionrequested.v1"
	Evicted             Type = "io.jetqueue.workload.evicted.v1"
	Requeued            Type = "io.jetqueue.workload.requeued.v1"
	Deactivated         Type = "io.jetqueue.workload.deactivated.v1"
	Placed              Type = "io.jetqueue.workload.placed.v1"
	BatchSkipped        Type = "io.jetqueue.batch.skipped.v1"
	BatchClosed         Type = "io.jetqueue.batch.closed.v1"
	ShardReleased       Type = "io.jetqueue.shard.released.v1"
)

// Event is one CloudEvent: attributes travel as ce-* headers, the payload
// as the body. ID doubles as Nats-Msg-Id, so a resubmitted event is
// deduplicated by JetStream.
type Event struct {
	ID      string
	Type    Type
	Source  string
	Time    time.Time
	Subject string
	Data    any
	// Batch, when set, is the unit of events this one belongs to.
	Batch *Batch
}

// CloudEvents header names (binary content mode).
const (
	HeaderSpecVersion = "ce-specversion"
	HeaderID          = "ce-id"
	HeaderType        = "ce-type"
	HeaderSource      = "ce-source"
	HeaderTime        = "ce-time"
	HeaderSubject     = "ce-subject"
	HeaderBatch       = "ce-jqbatch"
)

// Headers renders the CloudEvents attributes.
func (e Event) Headers() map[string]string {
	h := map[string]string{
		HeaderSpecVersion: "1.0",
		HeaderID:          e.ID,
		HeaderType:        string(e.Type),
		HeaderSource:      e.Source,
		HeaderTime:        e.Time.UTC().Format(time.RFC3339Nano),
		HeaderSubject:     e.Subject,
	}
	if e.Batch != nil {
		h[HeaderBatch] = e.Batch.String()
	}
	return h
}

// Body encodes the payload.
func (e Event) Body() ([]byte, error) { return json.Marshal(e.Data) }

// Parse rebuilds an event from its headers and body, decoding the payload
// into the type its ce-type names.
func Parse(header func(string) string, body []byte) (Event, error) {
	e := Event{ID: header(HeaderID), Type: Type(header(HeaderType)), Source: header(HeaderSource), Subject: header(HeaderSubject)}
	if v := header(HeaderSpecVersion); v != "1.0" {
		return e, fmt.Errorf("event %s: ce-specversion %q, want 1.0", e.ID, v)
	}
	if e.ID == "" {
		return e, fmt.Errorf("event without ce-id")
	}
	t, err := time.Parse(time.RFC3339Nano, header(HeaderTime))
	if err != nil {
		return e, fmt.Errorf("event %s: ce-time: %w", e.ID, err)
	}
	e.Time = t
	if v := header(HeaderBatch); v != "" {
		if e.Batch, err = ParseBatch(v); err != nil {
			return e, fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	newPayload, ok := payloads[e.Type]
	if !ok {
		return e, fmt.Errorf("event %s: unknown ce-type %q", e.ID, e.Type)
	}
	p := newPayload()
	if err := jsonv2.Unmarshal(body, p, strict); err != nil {
		return e, fmt.Errorf("event %s (%s): %w", e.ID, e.Type, err)
	}
	e.Data = p
	return e, nil
}

// strict refuses members the payload type does not name. Names match
// exactly (json.Marshal wrote them), duplicates and invalid UTF-8 are
// refused, and the body must be one value. encoding/json/v2's decode is
// used because every service decodes every event it reads: BenchmarkParse
// measures it against encoding/json's (2.8 times faster on this machine).
var strict = jsonv2.RejectUnknownMembers(true)

// payloads maps each type to a constructor of its payload.
var payloads = map[Type]func() any{
	ConfigApplied:       func() any { return new(ConfigAppliedData) },
	ConfigDeleted:       func() any { return new(ConfigRef) },
	WorkloadSubmitted:   func() any { return new(WorkloadSubmittedData) },
	PriorityChanged:     func() any { return new(PriorityChangedData) },
	ActiveChanged:       func() any { return new(ActiveChangedData) },
	WorkloadDeleted:     func() any { return new(WorkloadRef) },
	WorkloadExpired:     func() any { return new(WorkloadRef) },
	WorkloadFinished:    func() any { return new(WorkloadFinishedData) },
	PodsReady:           func() any { return new(WorkloadRef) },
	QuotaReserved:       func() any { return new(QuotaReservedData) },
	Inadmissible:        func() any { return new(InadmissibleData) },
	PreemptionRequested: func() any { return new(PreemptionRequestedData) },
	Evicted:             func() any { return new(EvictedData) },
	Requeued:            func() any { return new(RequeuedData) },
	Deactivated:         func() any { return new(WorkloadRef) },
	Placed:              func() any { return new(PlacedData) },
	BatchSkipped:        func() any { return new(BatchSkippedData) },
	BatchClosed:         func() any { return new(BatchClosedData) },
	ShardReleased:       func() any { return new(ShardReleasedData) },
}

// Ends says whether an event of type t ends its workload's life in the
// live state: a deletion, or the expiry of a finished workload. After it
// the workload's name is free and no decider knows the workload.
func Ends(t Type) bool { return t == WorkloadDeleted || t == WorkloadExpired }

// Types lists every event type, for docs and tests.
func Types() []Type {
	out := make([]Type, 0, len(payloads))
	for t := range payloads {
		out = append(out, t)
	}
	return out
}

// ConfigRef names a configuration object.
type ConfigRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ConfigAppliedData carries the applied manifest as JSON, exactly as
// decoded and defaulted, so that replays apply the same object.
type ConfigAppliedData struct {
	ConfigRef
	Object json.RawMessage `json:"object"`
}

// WorkloadRef names a workload.
type WorkloadRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// WorkloadSubmittedData carries the workload (a Job is converted first)
// and its creation time, which orders it in its queue.
type WorkloadSubmittedData struct {
	WorkloadRef
	Workload  json.RawMessage `json:"workload"`
	CreatedAt time.Time       `json:"createdAt"`
	// RequestDigest identifies the document the client sent (before any
	// conversion or defaulting), so that a retry under the same
	// Idempotency-Key is told from another submission reusing the key.
	// Events written before it existed have none.
	RequestDigest string `json:"requestDigest,omitempty"`
}

// Batch groups events a client sent as one unit (several workloads in one
// submission, or several changes marked with the JQ-Batch header):
// admission considers them in the same scheduling cycle, deciding only once
// all have arrived. It travels as the CloudEvents extension ce-jqbatch,
// "<id>/<size>".
type Batch struct {
	ID   string
	Size int
}

// String renders the header value.
func (b Batch) String() string { return fmt.Sprintf("%s/%d", b.ID, b.Size) }

// BatchSkippedData stands in a batch for a member that will never come:
// its publisher's fence refused it because its subject moved first. It
// carries the batch header itself, so a consumer counting the batch's
// members completes it.
type BatchSkippedData struct {
	// Event is the id of the event not published, Type its type.
	Event   string `json:"event"`
	Type    Type   `json:"type"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// BatchClosedData gives up on a batch whose members stopped arriving (its
// sender died midway, or lied about its size): admission publishes it once
// the batch has waited its limit, and from its place in the log on, the
// members that did arrive are decided without the rest. Being a fact in
// the log, not a timer, it makes every replay decide the same.
type BatchClosedData struct {
	Batch   string `json:"batch"`
	Missing int    `json:"missing"`
}

// ShardReleasedData hands a ClusterQueue over between admission shards.
// A configuration event at AtSeq moved the ClusterQueue from the tree
// From (owned by shard FromShard) to the tree To (owned by ToShard); the
// old owner publishes this once it has applied that event and published
// every decision it made before, so that in log order each of its
// decisions about the ClusterQueue precedes the release. The new owner
// decides nothing in To until it has read it. Trees are named
// "cohort/<name>" or "clusterqueue/<name>".
type ShardReleasedData struct {
	ClusterQueue string `json:"clusterQueue"`
	From         string `json:"from"`
	To           string `json:"to"`
	FromShard    int    `json:"fromShard"`
	ToShard      int    `json:"toShard"`
	AtSeq        uint64 `json:"atSeq"`
}

// MaxShardIndex bounds a shard number in a ShardReleased.
const MaxShardIndex = 1023

// Validate refuses a release that names no handover: no ClusterQueue,
// no sequence, a shard out of bounds or the same shard on both sides.
func (d *ShardReleasedData) Validate() error {
	switch {
	case d.ClusterQueue == "" || len(d.ClusterQueue) > 253:
		return fmt.Errorf("clusterQueue: want a name of 1 to 253 characters")
	case len(d.From) > 300 || len(d.To) > 300 || d.From == "" || d.To == "":
		return fmt.Errorf("from, to: want tree names of 1 to 300 characters")
	case d.FromShard < 0 || d.FromShard > MaxShardIndex || d.ToShard < 0 || d.ToShard > MaxShardIndex:
		return fmt.Errorf("fromShard, toShard: want 0 to %d", MaxShardIndex)
	case d.FromShard == d.ToShard:
		return fmt.Errorf("toShard: equals fromShard %d, no handover", d.FromShard)
	case d.AtSeq == 0:
		return fmt.Errorf("atSeq: want the sequence of the move, above 0")
	}
	return nil
}

// Limits of a batch. A batch holds back the decisions about its members
// until all have arrived, so a client may announce no more members than
// one request can carry (ingest's document limit, and JetStream's atomic
// batch limit); the id is an opaque token, bounded like JetStream's own
// batch ids.
const (
	MaxBatchSize     = 1000
	MaxBatchIDLength = 64
)

// ParseBatch reads a ce-jqbatch value: "<id>/<size>", the id at most
// MaxBatchIDLength bytes of letters, digits and "._:/-", the size a
// positive integer. Batches jetqueue's own services form (one instant's
// timers) may be larger than a client's; ParseClientBatch bounds those.
func ParseBatch(v string) (*Batch, error) {
	i := strings.LastIndexByte(v, '/')
	if i <= 0 {
		return nil, fmt.Errorf("batch %.80q: want <id>/<size>", v)
	}
	id := v[:i]
	if len(id) > MaxBatchIDLength {
		return nil, fmt.Errorf("batch id of %d bytes: at most %d", len(id), MaxBatchIDLength)
	}
	if j := strings.IndexFunc(id, func(r rune) bool { return !batchIDRune(r) }); j >= 0 {
		return nil, fmt.Errorf("batch id %q: character %q not allowed (letters, digits and ._:/- are)", id, id[j:j+1])
	}
	n, err := strconv.Atoi(v[i+1:])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("batch %.80q: size must be a positive integer", v)
	}
	return &Batch{ID: id, Size: n}, nil
}

// ParseClientBatch reads a JQ-Batch header: ParseBatch, and a size of at
// most MaxBatchSize.
func ParseClientBatch(v string) (*Batch, error) {
	b, err := ParseBatch(v)
	if err != nil {
		return nil, err
	}
	if b.Size > MaxBatchSize {
		return nil, fmt.Errorf("batch of %d: at most %d", b.Size, MaxBatchSize)
	}
	return b, nil
}

func batchIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/-", r)
}

// PriorityChangedData is a new spec.priority.
type PriorityChangedData struct {
	WorkloadRef
	Priority int32 `json:"priority"`
}

// ActiveChangedData is a new spec.active.
type ActiveChangedData struct {
	WorkloadRef
	Active bool `json:"active"`
}

// WorkloadFinishedData records that the job finished.
type WorkloadFinishedData struct {
	WorkloadRef
	Succeeded bool `json:"succeeded"`
}

// QuotaReservedData is an admission: the ClusterQueue, the flavor of each
// podSet's resources and the admitted pod counts.
type QuotaReservedData struct {
	WorkloadRef
	Admission scheduler.Admission `json:"admission"`
}

// InadmissibleData is why a workload waits; published when it changes.
type InadmissibleData struct {
	WorkloadRef
	Reason scheduler.Reason `json:"reason"`
}

// PreemptionRequestedData asks the preemptor to evict victims for a
// workload.
type PreemptionRequestedData struct {
	WorkloadRef
	ClusterQueue string   `json:"clusterQueue"`
	Victims      []Victim `json:"victims"`
}

// Victim is one workload chosen for preemption. Seq is the last sequence
// on its subject when it was chosen: the preemptor evicts it only if
// nothing happened to it since.
type Victim struct {
	WorkloadRef
	ClusterQueue string                   `json:"clusterQueue"`
	Kind         scheduler.PreemptionKind `json:"kind"`
	Seq          uint64                   `json:"seq"`
}

// EvictedData is a workload losing its quota; for reason Preempted it says
// by whom and on what grounds. For reason PodsReadyTimeout it carries
// KEP-349's requeue state: the workload waits out its backoff until
// RequeueAt, when a Requeued event returns it to its queue.
type EvictedData struct {
	WorkloadRef
	Reason       string                   `json:"reason"`
	Preemptor    *WorkloadRef             `json:"preemptor,omitempty"`
	PreemptorCQ  string                   `json:"preemptorClusterQueue,omitempty"`
	Kind         scheduler.PreemptionKind `json:"kind,omitempty"`
	RequeueCount int32                    `json:"requeueCount,omitempty"`
	RequeueAt    *time.Time               `json:"requeueAt,omitempty"`
}

// RequeuedData says that a timed-out workload's backoff is over (Until)
// and it queues again; Count is how often it has timed out.
type RequeuedData struct {
	WorkloadRef
	Count int32     `json:"count"`
	Until time.Time `json:"until"`
}

// PlacedData is the scorer's node ranking for an admitted workload.
type PlacedData struct {
	WorkloadRef
	PodSets []PodSetPlacement `json:"podSets"`
}

// PodSetPlacement is the chosen nodes of one podSet, or why none fit.
// Unranked counts the podSet's pods beyond the scorer's ranking budget
// (the scorer's MaxRankedPods per workload), which it leaves to the node
// scheduler, so that an event stays small whatever the pod count.
type PodSetPlacement struct {
	Name     string      `json:"name"`
	Nodes    []NodeScore `json:"nodes,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Filter   string      `json:"filter,omitempty"`
	Unranked int32       `json:"unranked,omitempty"`
}

// NodeScore is one pod's node and its scores.
type NodeScore struct {
	Node    string `json:"node"`
	FitPlus int64  `json:"fitPlus"`
	Scarce  int64  `json:"scarce"`
	Total   int64  `json:"total"`
}

// Names outside the event stream that several programs share.
const (
	// NodesBucket is the JetStream KV bucket of node states the scorer
	// reads when it does not watch Kubernetes (`jqctl nodes put` writes it).
	NodesBucket = "JQ_NODES"
	// SubjectScore answers node-ranking queries (request/reply).
	SubjectScore = "jq.api.v1.score"
	// ScorerDurable is the scorer's consumer of JQ_EVENTS; /v1/sync reads
	// from it whether every admission has been placed.
	ScorerDurable = "scorer"
)
