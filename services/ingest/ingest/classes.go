package ingest

import (
	"context"
	"encoding/json"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
)

// classLookup resolves priority classes from the latest config events, so
// a class applied a moment ago is already known to a Job submitted now.
type classLookup struct {
	ctx context.Context
	s   *Server
}

func (s *Server) classes(ctx context.Context) api.PriorityClasses { return classLookup{ctx, s} }

func (c classLookup) object(kind, name string, v any) bool {
	_, ev, err := c.s.last(c.ctx, events.ConfigSubject(kind, "", name))
	if err != nil || ev == nil || ev.Type != events.ConfigApplied {
		return false
	}
	return json.Unmarshal(ev.Data.(*events.ConfigAppliedData).Object, v) == nil
}

func (c classLookup) WorkloadPriorityClass(name string) (int32, bool) {
	var w api.WorkloadPriorityClass
	if !c.object(api.KindWorkloadPriorityClass, name, &w) {
		return 0, false
	}
	return w.Value, true
}

func (c classLookup) PriorityClass(name string) (int32, bool) {
	var p api.PriorityClass
	if !c.object(api.KindPriorityClass, name, &p) {
		return 0, false
	}
	return p.Value, true
}

// GlobalDefaultPriorityClass reads the projection: the lowest-valued class
// marked globalDefault.
func (c classLookup) GlobalDefaultPriorityClass() (string, int32, bool) {
	var name string
	var value int32
	err := c.s.store.Pool.QueryRow(c.ctx, `
		SELECT name, (object->>'value')::int FROM config_objects
		WHERE kind = 'PriorityClass' AND (object->>'globalDefault')::boolean
		ORDER BY (object->>'value')::int, name LIMIT 1`).Scan(&name, &value)
	if err != nil {
		return "", 0, false
	}
	return name, value, true
}
