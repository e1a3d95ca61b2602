package ingest

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jetqueue/jetqueue/libs/api"
)

// errorBody is API.md's error shape.
type errorBody struct {
	Errors []api.FieldError `json:"errors"`
}

// httpError is an error with its status and field errors.
type httpError struct {
	status int
	errs   []api.FieldError
}

func (e *httpError) Error() string { return api.Errors(e.errs).Error() }

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

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = fail(http.StatusInternalServerError, "", "", err.Error())
	}
	if he.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, he.status, errorBody{Errors: he.errs})
}
