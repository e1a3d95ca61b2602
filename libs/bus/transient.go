package bus

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Transient says whether err is an outage that the same request, tried
// again shortly, may get past: NATS or JetStream unreachable, without a
// leader or quorum, or PostgreSQL unreachable. A front door answers it
// 503 with Retry-After rather than 500: during a JetStream leader change
// every request fails for seconds, and that is neither the client's fault
// nor a bug.
//
// It is not "safe to repeat": a publish that timed out may have been
// stored. Clients repeat writes under the same Idempotency-Key.
//
// context.Canceled is not transient: the caller gave up, and no answer
// reaches it anyway.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, t := range transientErrors {
		if errors.Is(err, t) {
			return true
		}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		_, ok := transientCodes[api.ErrorCode]
		return ok
	}
	return transientNet(err) || transientPostgres(err)
}

// transientErrors are the sentinels of a request that found no one to
// answer it, or no connection to send it on, for now.
var transientErrors = []error{
	// A request's own deadline: JetStream did not answer in time (nats.go
	// answers a deadline with the context's error, a Request without one
	// with ErrTimeout), or the database pool had no connection to give.
	context.DeadlineExceeded,
	nats.ErrTimeout,
	// No responders: during a leader change no server answers a subject
	// for a moment; jetstream's publish turns it into ErrNoStreamResponse
	// after its own retries.
	nats.ErrNoResponders,
	jetstream.ErrNoStreamResponse,
	// The connection is between servers (nats.go reconnects endlessly,
	// see Connect) or being replaced.
	nats.ErrConnectionClosed,
	nats.ErrConnectionReconnecting,
	nats.ErrConnectionDraining,
	nats.ErrDisconnected,
	nats.ErrNoServers,
	nats.ErrStaleConnection,
	nats.ErrMaxConnectionsExceeded,
	jetstream.ErrConnectionClosed,
	jetstream.ErrServerShutdown,
	jetstream.ErrNoHeartbeat,
	jetstream.ErrConsumerLeadershipChanged,
	jetstream.ErrAsyncPublishTimeout,
	jetstream.ErrTooManyStalledMsgs,
}

// transientCodes are the JetStream API errors (nats-server's
// server/errors.json) that mean "not now" rather than "not this". The
// HTTP-like code is no guide on its own: 503 also marks "account not
// found" and "clustering required", which no retry cures, and 500 marks
// "stream is offline", which a retry after the election does.
var transientCodes = map[jetstream.ErrorCode]struct{}{
	10004: {}, // JSClusterIncompleteErr: incomplete results
	10008: {}, // JSClusterNotAvailErr: JetStream system temporarily unavailable
	10009: {}, // JSClusterNotLeaderErr: JetStream cluster can not handle request
	10023: {}, // JSInsufficientResourcesErr: the leader steps down; another may have room
	10118: {}, // JSStreamOfflineErr: stream is offline
	10119: {}, // JSConsumerOfflineErr: consumer is offline
	10076: {}, // JSNotEnabledErr: a restarted server still enabling JetStream (see Ensure)
	10163: {}, // JSStreamExpectedLastSeqPerSubjectNotReady: temporarily unavailable
	10194: {}, // JSStreamOfflineReasonErrF: stream is offline: {err}
	10195: {}, // JSConsumerOfflineReasonErrF: consumer is offline: {err}
	// JSStreamDuplicateMessageConflict: a publish with the same Nats-Msg-Id
	// is still being replicated (a client asking again while quorum is
	// lost); once it settles, the same publish is stored or answered as a
	// duplicate. The chaos-cluster suite saw 775 of them answered 500.
	10158: {},
}

// transientNet is a network failure below either client: a timeout, a
// refused or reset connection, a connection cut mid-answer.
func transientNet(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF)
}

// transientPostgres is PostgreSQL unreachable, restarting or full of
// connections, or a transaction it asks to run again.
func transientPostgres(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	if strings.HasPrefix(pe.Code, "08") { // class 08: connection exception
		return true
	}
	switch pe.Code {
	case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"53300",          // too_many_connections
		"40001", "40P01": // serialization_failure, deadlock_detected: run it again
		return true
	}
	return false
}
