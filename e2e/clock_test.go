package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestManualClock: with --manual-clock, creation times come from the
// shared clock, which starts at 2026-01-01T00:00:00Z and moves only with
// POST /v1/debug/clock/advance; without it the endpoint is refused.
func TestManualClock(t *testing.T) {
	off := start(t)
	if code := off.call("POST", "/v1/debug/clock/advance", []byte(`{"duration":"1m"}`), nil); code != http.StatusNotFound {
		t.Fatalf("advance without --manual-clock: %d, want 404", code)
	}
	s := startWith(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("first"))
	if code := s.call("POST", "/v1/debug/clock/advance", []byte(`{"duration":"soon"}`), nil); code != http.StatusBadRequest {
		t.Fatalf("bad duration: %d", code)
	}
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"6m"}`))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload("second"))
	s.sync()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, want := range map[string]time.Time{"first": start, "second": start.Add(6 * time.Minute)} {
		var v struct {
			CreatedAt time.Time `json:"createdAt"`
		}
		s.call("GET", "/v1/workloads/ns/"+name, nil, &v)
		if !v.CreatedAt.Equal(want) {
			t.Errorf("%s created at %v, want %v", name, v.CreatedAt, want)
		}
	}
}
