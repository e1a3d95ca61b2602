// Package bus is jetqueue's JetStream plumbing: connecting, declaring the
// event stream, publishing events deduplicated and fenced, and the
// single-active lease. Services use it; the decision core never does.
package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// Connect dials NATS with endless reconnects, so a broker restart is a
// pause rather than an outage, and a bounded drain on close. opts add to
// these, typically an Identity's.
//
// A server that hangs (frozen, or cut off without a TCP reset) is noticed
// by pings: a ping goes out every PingInterval, and when MaxPingsOut are
// unanswered at the next one ((MaxPingsOut+1) x PingInterval = 8 s after
// the server froze) the connection is dropped and a server of the
// cluster dialled again. With nats.go's defaults (a ping every 2 minutes,
// 2 outstanding) requests would fail for up to 6 minutes. A dial is
// bounded by DialTimeout.
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DrainTimeout(10 * time.Second),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
		nats.Timeout(DialTimeout),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}

// How Connect notices a hung server, and bounds a dial. A ping costs a
// few bytes each way, so pinging every 2 s is cheap even for hundreds of
// connections; three missed in a row is not a GC pause or a busy server.
const (
	PingInterval = 2 * time.Second
	MaxPingsOut  = 3
	DialTimeout  = 2 * time.Second
)

// DefaultDuplicates is JQ_EVENTS' dedupe window: how long JetStream
// remembers a Nats-Msg-Id (and so an Idempotency-Key of ingest).
const DefaultDuplicates = 2 * time.Minute

// StreamOptions are the operator's knobs of JQ_EVENTS.
type StreamOptions struct {
	Replicas int
	MaxAge   time.Duration // 0 keeps events forever
	// Duplicates is JetStream's dedupe window for Nats-Msg-Id; 0 means
	// DefaultDuplicates.
	Duplicates time.Duration
}

// EnsureStream creates JQ_EVENTS or brings its configuration up to date;
// it is safe to call from every service at start.
func EnsureStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:        events.Stream,
		Description: "jetqueue config and workload events, totally ordered",
		Subjects:    events.StreamSubjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    max(o.Replicas, 1),
		MaxAge:      o.MaxAge,
		Duplicates:  o.Duplicates,
		AllowDirect: true,
		// Atomic batches (PublishAtomic) make a multi-document request
		// all or nothing; an existing stream gains the flag on update.
		AllowAtomicPublish: true,
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	s, err := Ensure(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", events.Stream, err)
	}
	return s, nil
}

// ErrConflict means the subject moved on since the writer last read it:
// re-read and re-decide.
var ErrConflict = errors.New("wrong last subject sequence")

// Codes JetStream uses for a failed Nats-Expected-Last-Subject-Sequence:
// 10071 on a single replica, 10164 on a replicated stream.
const (
	codeWrongLastSequence         jetstream.ErrorCode = 10071
	codeWrongLastSequenceConstant jetstream.ErrorCode = 10164
)

// Publish sends one event with its ce-* headers and Nats-Msg-Id = ce-id.
// With expectLast set, the publish succeeds only if the last message on the
// event's subject has that sequence (0: the subject is empty); otherwise it
// returns ErrConflict. It returns the stream sequence and whether JetStream
// dropped it as a duplicate of an earlier publish with the same id.
func Publish(ctx context.Context, js jetstream.JetStream, ev events.Event, expectLast *uint64) (seq uint64, duplicate bool, err error) {
	msg, err := message(ev, expectLast)
	if err != nil {
		return 0, false, err
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, false, publishError(ev, err)
	}
	return ack.Sequence, ack.Duplicate, nil
}

// PublishAsync is Publish without waiting for the acknowledgement, so a
// batch of decisions costs one round trip rather than one each; Result
// reads the outcome. When as many publications as the connection allows
// (nats.go's 4,000 by default) await their acknowledgement, it waits for
// room, up to asyncStall, rather than failing after nats.go's 200 ms: a
// server slow under load is a reason to slow down, not to restart.
func PublishAsync(js jetstream.JetStream, ev events.Event, expectLast *uint64) (jetstream.PubAckFuture, error) {
	msg, err := message(ev, expectLast)
	if err != nil {
		return nil, err
	}
	f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(asyncStall))
	if err != nil {
		return nil, publishError(ev, err)
	}
	return f, nil
}

// asyncStall is how long PublishAsync waits for room among the
// publications awaiting their acknowledgement. Beyond it the server is
// not slow but gone, and the error restarts the caller.
const asyncStall = time.Minute

// Result waits for an asynchronous publish, with the errors of Publish.
func Result(ctx context.Context, ev events.Event, f jetstream.PubAckFuture) (uint64, bool, error) {
	select {
	case ack := <-f.Ok():
		return ack.Sequence, ack.Duplicate, nil
	case err := <-f.Err():
		return 0, false, publishError(ev, err)
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
}

// message renders an event as a JetStream message. The dedupe id and the
// fence are headers (what jetstream's publish options set too), so that
// the same message serves a plain and an atomic batch publish.
func message(ev events.Event, expectLast *uint64) (*nats.Msg, error) {
	body, err := ev.Body()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ev.Type, err)
	}
	msg := nats.NewMsg(ev.Subject)
	msg.Data = body
	for k, v := range ev.Headers() {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	if expectLast != nil {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(*expectLast, 10))
	}
	return msg, nil
}

func publishError(ev events.Event, err error) error {
	if isConflict(err) {
		return fmt.Errorf("publish %s on %s: %w", ev.Type, ev.Subject, ErrConflict)
	}
	return fmt.Errorf("publish %s on %s: %w", ev.Type, ev.Subject, err)
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSequence || apiErr.ErrorCode == codeWrongLastSequenceConstant)
}

// Decode parses a stream message into an event for a consumer that
// applies it. A decision whose ce-source is not its owner's
// (events.CheckSource) is an error like one that does not parse: every
// consumer skips it, so no service decides for another.
func Decode(msg jetstream.Msg) (events.Event, error) {
	h := msg.Headers()
	ev, err := events.Parse(h.Get, msg.Data())
	if err != nil {
		return ev, err
	}
	return ev, events.CheckSource(ev)
}

// Conn is a service's connection to the event stream.
type Conn struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Stream jetstream.Stream
}

// Open connects to NATS and makes sure JQ_EVENTS exists: what every
// service does first. Close drains the connection. opts are passed to
// Connect.
func Open(ctx context.Context, url, name string, o StreamOptions, opts ...nats.Option) (*Conn, error) {
	nc, err := Connect(url, name, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := EnsureStream(ctx, js, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Conn{NC: nc, JS: js, Stream: s}, nil
}

// Close drains the connection: buffered publishes are flushed and
// subscriptions finish what they hold.
func (c *Conn) Close() { _ = c.NC.Drain() }

// Replicas is the replication of JQ_EVENTS (--stream-replicas). Every
// other stream and bucket of jetqueue follows it, so that one flag makes
// the whole system as available as its event log. It is 1 while there is
// no JQ_EVENTS. A read that fails is asked again (Ensure), then is an
// error: never a guess of 1, which every create-or-update would take as
// the wish to bring an R3 bucket down to R1 (a service starting while a
// node of the cluster was down did exactly that).
func Replicas(ctx context.Context, js jetstream.JetStream) (int, error) {
	return Ensure(ctx, func(ctx context.Context) (int, error) {
		s, err := js.Stream(ctx, events.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read the replicas of %s: %w", events.Stream, err)
		}
		return max(1, s.CachedInfo().Config.Replicas), nil
	})
}

// ensurePatience is how long Ensure keeps asking: a JetStream server
// starting, one busy on a slow disk, or services racing to declare the
// same stream can take longer than a request's timeout to settle.
const ensurePatience = time.Minute

// firstAttempt bounds one declaration's wait for an answer. A server
// given several declarations of the same stream at once can drop the
// answer to one of them (nats-server answers none while it creates the
// stream, and the losers' requests go unanswered), so an attempt is
// bounded by much less than the caller's patience, and asked again. Each
// later attempt waits twice as long (up to maxAttempt): a server slow on
// its disk still gets an answer out.
const (
	firstAttempt = 3 * time.Second
	maxAttempt   = 20 * time.Second
)

// Ensure runs a create-or-update of a stream, bucket or consumer until it
// succeeds, the error is one that asking again cannot cure, the caller
// gives up, or ensurePatience has passed. Each attempt gets its own
// context, bounded as firstAttempt says; create must use it. Services
// start together on a fresh server: each one's create-or-update first
// asks for an update (not found), then creates, and a create that loses
// the race to another one is refused (10058 name in use, 10065 subjects
// overlap while the other's stream is being set up, or a bucket that
// exists) or goes unanswered; asked again, it finds the stream and
// updates it. The waits back off (50 ms doubling to 2 s) with jitter, so
// racing services do not ask in lockstep.
func Ensure[T any](ctx context.Context, create func(ctx context.Context) (T, error)) (T, error) {
	wait, deadline := 50*time.Millisecond, time.Now().Add(ensurePatience)
	attempt := firstAttempt
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := create(actx)
		cancel()
		if err == nil || !retryable(ctx, err) {
			return v, err
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("JetStream did not settle within %s: %w", ensurePatience, err)
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, 2*time.Second)
		attempt = min(2*attempt, maxAttempt)
	}
}

// raceCodes are the JetStream errors a declaration gets while another
// process declares the same thing, or while JetStream itself is still
// coming up (a cluster without a meta leader yet).
var raceCodes = map[jetstream.ErrorCode]bool{
	jetstream.JSErrCodeStreamNameInUse:       true, // created under us with other options
	10065:                                    true, // subjects overlap: the same stream, mid-creation
	jetstream.JSErrCodeStreamNotFound:        true, // created and not yet visible to the update
	jetstream.JSErrCodeConsumerNameExists:    true,
	jetstream.JSErrCodeConsumerExists:        true,
	jetstream.JSErrCodeConsumerAlreadyExists: true,
	jetstream.JSErrCodeJetStreamNotEnabled:   true, // the server is still enabling JetStream
	10008:                                    true, // JetStream system temporarily unavailable
	10009:                                    true, // cluster cannot handle the request (no leader yet)
}

// retryable tells an error that may cure itself (see Ensure) from one
// that will not, and a request that went unanswered from the caller
// giving up.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrBucketExists) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && raceCodes[apiErr.ErrorCode]
}
