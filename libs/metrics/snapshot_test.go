package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSnapshotAge: jetqueue_snapshot_age_seconds is absent until a
// snapshot is written or restored, then the seconds since the time Taken
// was given, by the scrape's clock, labelled with the service as
// jetqueue_snapshot_seq is; a newer snapshot starts it again.
func TestSnapshotAge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewSnapshot(reg, "podsready")
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	m.Age.Now = func() time.Time { return now }
	if n := testutil.CollectAndCount(reg, "jetqueue_snapshot_age_seconds"); n != 0 {
		t.Errorf("%d series before any snapshot, want none", n)
	}
	age := func(v string) string {
		return `
# HELP jetqueue_snapshot_age_seconds Seconds since the newest snapshot this instance wrote or restored was taken.
# TYPE jetqueue_snapshot_age_seconds gauge
jetqueue_snapshot_age_seconds{service="podsready"} ` + v + "\n"
	}
	m.Taken(t0)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(age("90")), "jetqueue_snapshot_age_seconds"); err != nil {
		t.Error(err)
	}
	now = now.Add(30 * time.Second)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(age("120")), "jetqueue_snapshot_age_seconds"); err != nil {
		t.Error("the age grows between scrapes:", err)
	}
	m.Taken(now.Add(-5 * time.Second))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(age("5")), "jetqueue_snapshot_age_seconds"); err != nil {
		t.Error("a newer snapshot:", err)
	}
}
