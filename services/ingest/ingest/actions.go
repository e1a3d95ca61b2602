package ingest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// workloadAction publishes a state change of an existing workload.
func (s *Server) workloadAction(typ events.Type) func(*http.Request) (int, any, error) {
	return func(r *http.Request) (int, any, error) {
		ns, name := r.PathValue("ns"), r.PathValue("name")
		ref := events.WorkloadRef{Namespace: ns, Name: name}
		object := "Workload/" + ns + "/" + name
		var data any = &ref
		switch typ {
		case events.WorkloadFinished:
			data = &events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: true}
			if b, _ := io.ReadAll(http.MaxBytesReader(nil, r.Body, 4096)); len(strings.TrimSpace(string(b))) > 0 {
				var in struct {
					Succeeded bool `json:"succeeded"`
				}
				if err := strictJSON(b, &in); err != nil {
					return 0, nil, fail(http.StatusBadRequest, object, "succeeded", err.Error())
				}
				data = &events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: in.Succeeded}
			}
		case events.PriorityChanged:
			b, err := s.body(r)
			if err != nil {
				return 0, nil, err
			}
			var in struct {
				Priority *int32 `json:"priority"`
			}
			if err := strictJSON(b, &in); err != nil || in.Priority == nil {
				return 0, nil, fail(http.StatusBadRequest, object, "priority", "want {\"priority\": <int32>}")
			}
			data = &events.PriorityChangedData{WorkloadRef: ref, Priority: *in.Priority}
		case events.ActiveChanged:
			b, err := s.body(r)
			if err != nil {
				return 0, nil, err
			}
			var in struct {
				Active *bool `json:"active"`
			}
			if err := strictJSON(b, &in); err != nil || in.Active == nil {
				return 0, nil, fail(http.StatusBadRequest, object, "active", "want {\"active\": true|false}")
			}
			data = &events.ActiveChangedData{WorkloadRef: ref, Active: *in.Active}
		}
		subject := events.WorkloadSubject(ns, name)
		ev := s.event(typ, subject, data)
		if v := r.Header.Get("JQ-Batch"); v != "" {
			b, err := events.ParseClientBatch(v)
			if err != nil {
				return 0, nil, fail(http.StatusBadRequest, object, "JQ-Batch", err.Error())
			}
			// A batch holds its members' decisions back until the last
			// arrives (or 10s pass): opening one is a privilege of its own.
			if err := s.authorize(r, batchAttributes(ns)); err != nil {
				return 0, nil, err
			}
			ev.Batch = b
		}
		// The fence only guards against acting on a workload deleted in the
		// meantime; admission's own decisions move the subject too, so a
		// conflict is re-read and retried.
		var got uint64
		for attempt := 0; ; attempt++ {
			seq, prev, err := s.last(r.Context(), subject)
			if err != nil {
				return 0, nil, err
			}
			if prev == nil || events.Ends(prev.Type) {
				return 0, nil, fail(http.StatusNotFound, object, "", "workload not found")
			}
			got, _, err = bus.Publish(r.Context(), s.js, ev, &seq)
			if err == nil {
				break
			}
			if !errors.Is(err, bus.ErrConflict) || attempt == 4 {
				return 0, nil, conflictOr(err, object)
			}
		}
		return http.StatusAccepted, map[string]any{"namespace": ns, "name": name, "seq": got}, nil
	}
}

func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
