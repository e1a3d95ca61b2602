package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
)

// classLookup resolves priority classes from the latest config events, so
// a class applied a moment ago is already known to a Job submitted now.
// Only a class absent from the log (or deleted) is "not found"; a read
// that fails (a NATS timeout, no responders, a JetStream leader election,
// a PostgreSQL error) is an error, which the submission answers as 503:
// refusing a valid submission for good would lose it, as clients do not
// retry a 400.
type classLookup struct {
	ctx context.Context
	s   *Server
}

func (s *Server) classes(ctx context.Context) api.PriorityClasses { return classLookup{ctx, s} }

// object reads the last config event of kind/name into v: false without
// error when the class does not exist.
func (c classLookup) object(kind, name string, v any) (bool, error) {
	_, ev, err := c.s.last(c.ctx, events.ConfigSubject(kind, "", name))
	if err != nil {
		return false, err
	}
	if ev == nil || ev.Type != events.ConfigApplied {
		return false, nil
	}
	data, ok := ev.Data.(*events.ConfigAppliedData)
	if !ok {
		return false, fmt.Errorf("%s %s: config event carries %T", kind, name, ev.Data)
	}
	if err := json.Unmarshal(data.Object, v); err != nil {
		return false, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return true, nil
}

func (c classLookup) WorkloadPriorityClass(name string) (int32, bool, error) {
	var w api.WorkloadPriorityClass
	if ok, err := c.object(api.KindWorkloadPriorityClass, name, &w); !ok {
		return 0, false, err
	}
	return w.Value, true, nil
}

func (c classLookup) PriorityClass(name string) (int32, bool, error) {
	var p api.PriorityClass
	if ok, err := c.object(api.KindPriorityClass, name, &p); !ok {
		return 0, false, err
	}
	return p.Value, true, nil
}

// GlobalDefaultPriorityClass reads the projection: the lowest-valued class
// marked globalDefault. No row is "none"; any other error is an error, not
// "none", which would silently give the Job the wrong priority.
func (c classLookup) GlobalDefaultPriorityClass() (string, int32, bool, error) {
	var name string
	var value int32
	err := c.s.store.Pool.QueryRow(c.ctx, `
		SELECT name, (object->>'value')::int FROM config_objects
		WHERE kind = 'PriorityClass' AND (object->>'globalDefault')::boolean
		ORDER BY (object->>'value')::int, name LIMIT 1`).Scan(&name, &value)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	return name, value, true, nil
}
