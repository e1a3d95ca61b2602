package e2e

import (
	"fmt"
	"net/http"
	"testing"
)

// TestProjectionWithTwoIngestInstances: two ingest instances serve
// submissions while one of them stops midway; the projection (one writer
// at a time under the projector lease) ends equal to the log: every
// submission listed exactly once, at the stream's last sequence.
func TestProjectionWithTwoIngestInstances(t *testing.T) {
	s := start(t)
	first := s.base
	s.startIngest()
	second := s.base
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	const n = 120
	for i := range n {
		s.base = first
		if i%2 == 1 || i >= n/2 {
			s.base = second
		}
		if i == n/2 {
			s.stopIngest()
		}
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.base = second
	s.sync()
	seen := map[string]int{}
	for _, v := range s.workloads() {
		seen[v.Namespace+"/"+v.Name]++
	}
	for i := range n {
		if k := fmt.Sprint("ns/w", i); seen[k] != 1 {
			t.Errorf("%s listed %d times, want 1", k, seen[k])
		}
	}
	if len(seen) != n {
		t.Errorf("%d workloads listed, want %d", len(seen), n)
	}
	if got := s.eventsPerWorkload("io.jetqueue.workload.submitted.v1"); len(got) != n {
		t.Errorf("%d submissions in the log, want %d", len(got), n)
	}
}
