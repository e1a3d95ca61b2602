package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/history"
	"github.com/jetqueue/jetqueue/libs/whatif"
)

// whatIfTimeout is how long the simulation of a what-if may take beyond
// reading the log.
const whatIfTimeout = 2 * time.Minute

// whatIf is POST /v1/whatif: the body is the changed configuration
// (multi-document YAML or JSON, as for apply); the window is ?since=
// (a duration up to now) or ?from= and ?to= (RFC 3339), at most
// whatif.MaxWindow long. The recorded history is read from JQ_EVENTS.
// Reading every queue's history, it asks list on clusterqueues; the
// workloads it names are only those the caller may read.
func (s *Server) whatIf(r *http.Request) (int, any, error) {
	if err := s.authorize(r, rbac.Attributes{Verb: "list", APIGroup: groupKueue, Resource: "clusterqueues"}); err != nil {
		return 0, nil, err
	}
	from, to, err := s.window(r)
	if err != nil {
		return 0, nil, err
	}
	top := whatif.DefaultTop
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return 0, nil, fail(http.StatusBadRequest, "", "top", "must be an integer from 1 to 1000")
		}
		top = n
	}
	objs, err := s.decode(r)
	if err != nil {
		return 0, nil, err
	}
	if err := validateConfig(objs); err != nil {
		return 0, nil, err
	}
	release, err := s.heavySeat(r)
	if err != nil {
		return 0, nil, err
	}
	defer release()
	recs, err := s.readLog(r.Context(), to)
	if err != nil {
		return 0, nil, s.heavyError(err)
	}
	// Read after the log, as stateAt does.
	floor, err := bus.PurgeFloor(r.Context(), s.js)
	if err != nil {
		return 0, nil, err
	}
	rep, err := whatif.Run(recs, whatif.Options{From: from, To: to, Config: objs, Top: top, Floor: floor,
		Budget: whatif.Budget{MaxSteps: s.heavy().lim.WhatIfSteps, Stop: s.stopper(r.Context(), "whatif")}})
	switch {
	case errors.Is(err, whatif.ErrBudget), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 0, nil, s.heavyError(err)
	case errors.Is(err, history.ErrBeforeHistory):
		return 0, nil, fail(http.StatusGone, "", "from", s.purged(r.Context(), err, floor).Error())
	case errors.Is(err, whatif.ErrWindow):
		return 0, nil, fail(http.StatusBadRequest, "", "to", err.Error())
	case err != nil:
		return 0, nil, fail(http.StatusBadRequest, "", "", err.Error())
	}
	s.visibility(r).whatIf(&rep)
	return http.StatusOK, rep, nil
}

// window reads ?since= or ?from= and ?to=; one of them is required, so
// that no what-if runs over an unbounded range.
func (s *Server) window(r *http.Request) (time.Time, time.Time, error) {
	q := r.URL.Query()
	now := s.cfg.Now().UTC()
	since, from, to := q.Get("since"), q.Get("from"), q.Get("to")
	switch {
	case since != "" && (from != "" || to != ""):
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "since", "give since, or from and to, not both")
	case since != "":
		d, err := time.ParseDuration(since)
		if err != nil || d <= 0 || d > whatif.MaxWindow {
			return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "since",
				fmt.Sprintf("must be a positive duration of at most %s, e.g. 24h", whatif.MaxWindow))
		}
		return now.Add(-d), now, nil
	case from == "" || to == "":
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "since", "a window is required: since, or from and to")
	}
	f, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "from", "must be an RFC 3339 time")
	}
	t, err := time.Parse(time.RFC3339Nano, to)
	if err != nil {
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "to", "must be an RFC 3339 time")
	}
	switch {
	case !t.After(f):
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "to", "must be after from")
	case t.After(now):
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "to", "is in the future (now is "+now.Format(time.RFC3339Nano)+")")
	case t.Sub(f) > whatif.MaxWindow:
		return time.Time{}, time.Time{}, fail(http.StatusBadRequest, "", "from", fmt.Sprintf("the window is longer than %s", whatif.MaxWindow))
	}
	return f.UTC(), t.UTC(), nil
}
