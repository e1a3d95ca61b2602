package ingest

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/jetqueue/jetqueue/libs/api"
)

// unavailable is the 503 of a request that could not be decided because
// something it depends on could not be read: what names it for the client
// ("WorkloadPriorityClass low"); err, the cause, goes only to the log
// (writeError). A 503 carries Retry-After and a durable submission is
// delivered again, so a read that failed for a moment (a NATS timeout, a
// JetStream leader election, a PostgreSQL restart) costs a retry, never
// the submission: answering it as 400 would make the client drop a valid
// request.
func unavailable(what string, err error) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, cause: err,
		errs: []api.FieldError{{Message: fmt.Sprintf("could not read %s; retry later", what)}}}
}

// invalidOrUnavailable answers an error of a conversion that consulted the
// priority classes: a failed lookup is 503, anything else 400.
func invalidOrUnavailable(err error) *httpError {
	var le *api.ClassLookupError
	if errors.As(err, &le) {
		return unavailable(le.What(), le)
	}
	return invalid(err)
}
