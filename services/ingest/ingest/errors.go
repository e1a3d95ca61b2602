package ingest

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
)

// errorBody is API.md's error shape; a 5xx adds the request id.
type errorBody struct {
	Errors    []api.FieldError `json:"errors"`
	RequestID string           `json:"requestId,omitempty"`
}

// httpError is an error with its status and field errors. A 5xx may keep
// its internal cause for the log; the client never sees it.
type httpError struct {
	status int
	errs   []api.FieldError
	cause  error
}

func (e *httpError) Error() string {
	if e.cause != nil {
		return api.Errors(e.errs).Error() + ": " + e.cause.Error()
	}
	return api.Errors(e.errs).Error()
}

func (e *httpError) Unwrap() error { return e.cause }

func fail(status int, object, field, msg string) *httpError {
	return &httpError{status: status, errs: []api.FieldError{{Object: object, Field: field, Message: msg}}}
}

// invalid turns a decoding or validation error into a 400 that keeps every
// field error.
func invalid(err error) *httpError {
	var list api.Errors
	if errors.As(err, &list) {
		return &httpError{status: http.StatusBadRequest, errs: list}
	}
	var fe api.FieldError
	if errors.As(err, &fe) {
		return &httpError{status: http.StatusBadRequest, errs: []api.FieldError{fe}}
	}
	return fail(http.StatusBadRequest, "", "", err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// unexpected answers an error no handler turned into an answer. An outage
// (bus.Transient: JetStream without a leader or quorum, NATS or
// PostgreSQL unreachable, a lookup that ran out of time) is 503 with
// Retry-After: the same request shortly after may succeed, and clients
// retry it (under the same Idempotency-Key; see retriesDoc). During a
// JetStream leader change every request fails for seconds, and a 500
// would tell the client it met a bug. Anything else is one: 500.
func unexpected(err error) *httpError {
	if bus.Transient(err) {
		return &httpError{status: http.StatusServiceUnavailable, cause: err,
			errs: []api.FieldError{{Message: "temporarily unavailable; retry (the server log has the details under this request's id)"}}}
	}
	return &httpError{status: http.StatusInternalServerError, cause: err,
		errs: []api.FieldError{{Message: "internal error; the server log has the details under this request's id"}}}
}

// writeError answers an error. A 4xx says what was wrong with the
// request. A 5xx says only what a client can act on, with the request id;
// the internal error (which may name the database, its user and host) goes
// to the log under the same id. r is nil for answers outside an HTTP
// request (a durable submission refused before it became one).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if se, ok := fromAPIStatus(err); ok {
		he = se
	} else if !errors.As(err, &he) {
		he = unexpected(err)
	}
	if he.status == http.StatusUnauthorized {
		// RFC 6750: say which scheme would have been accepted.
		w.Header().Set("WWW-Authenticate", `Bearer realm="jetqueue"`)
	}
	if he.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if he.status < 500 {
		if kubernetesPath(r) {
			writeJSON(w, he.status, asStatus(err, he, ""))
			return
		}
		writeJSON(w, he.status, errorBody{Errors: he.errs})
		return
	}
	if he.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	var id string
	if r != nil {
		id = requestID(r.Context())
	}
	if id == "" {
		id = nuid.Next()
		w.Header().Set(HeaderRequestID, id)
	}
	fields := []zap.Field{zap.String("request_id", id), zap.Int("status", he.status), zap.Error(err)}
	if r != nil {
		fields = append(fields, zap.String("method", r.Method), zap.String("path", r.URL.Path))
	}
	s.log.Error("request failed", fields...)
	if kubernetesPath(r) {
		writeJSON(w, he.status, asStatus(nil, he, id))
		return
	}
	writeJSON(w, he.status, errorBody{Errors: he.errs, RequestID: id})
}

// retriesDoc is the API reference's section on retrying (docs/api.md,
// from the OpenAPI document's description): what unexpected and the
// handlers' 503s promise a client.
const retriesDoc = "## Retries\n\n" +
	"A request answered 503 (unavailable for a moment: JetStream electing a leader, NATS or PostgreSQL unreachable, admission too far behind), " +
	"502 or 504 (a proxy or a wait that ran out) or 429 (too many requests), or whose connection failed or timed out, may succeed if sent again: " +
	"wait at least the `Retry-After` header's seconds, back off exponentially with jitter, and stop after a bounded time " +
	"(`jqctl` waits 100 ms doubling up to 5 s, for at most 30 s, or `JQ_RETRY_TIMEOUT`). " +
	"A 500 is a bug and any other 4xx is the request's fault: neither is retried.\n\n" +
	"Send every try of a submission (`POST /v1/workloads`, `jq.api.v1.workloads.submit`) with the same `Idempotency-Key`, " +
	"made once per submission, not per try: a try stored before its answer was lost is then answered 200 with the first answer " +
	"rather than submitted twice. Without a key a named workload sent again with the same document is recognized too, " +
	"but one named by `generateName` would be created again. `POST /v1/apply` is declarative: a retry answers `unchanged`. " +
	"A retried delete whose first try took effect answers 404; a retried finish, podsready, priority or active change " +
	"is recorded again, to the same effect.\n\n" +
	"Over NATS request/reply the answer's `Status` header carries the status and `Retry-After` the wait."
