package eta

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRedactedCountsForeignFinishes: a finish of another namespace's
// workload is counted in the estimate, with neither its name, its time
// nor its run time; the caller's own finishes and the estimate's time stay.
func TestRedactedCountsForeignFinishes(t *testing.T) {
	at := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	wait := 7200.0
	theirs := Finish{Namespace: "team-b", Name: "secret", At: at.Add(-time.Minute), Runtime: Runtime{Seconds: 7140, Basis: FromAnnotation}}
	ours := Finish{Namespace: "team-a", Name: "mine", At: at, Runtime: Runtime{Seconds: 600, Basis: FromAnnotation}}
	after := []Finish{theirs, ours, theirs}
	e := &Estimate{Namespace: "team-a", Name: "w", At: &at, WaitSeconds: &wait, After: after, AfterCount: 4,
		Assumption: Assumption(after, 4, wait)}
	got := e.Redacted(func(ns string) bool { return ns == "team-a" })
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"team-b", "secret", "7140", "1h59m0s", "01:59:00"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the redacted estimate says %s: %s", secret, b)
		}
	}
	want := "assumes team-a/mine (run time 10m0s, from its jetqueue.dev/expected-runtime annotation), 2 workloads of other namespaces, 1 more finishes as expected, and no workload of higher priority arrives"
	if got.Assumption != want {
		t.Errorf("assumption\n got %s\nwant %s", got.Assumption, want)
	}
	if got.At == nil || !got.At.Equal(at) || len(got.After) != 3 || got.After[1] != ours || got.AfterCount != 4 {
		t.Errorf("the caller's own answer changed: %s", b)
	}
	if e.After[0] != theirs {
		t.Errorf("Redacted changed the estimate it was given")
	}
	if all := e.Redacted(func(string) bool { return true }); all.Assumption != e.Assumption {
		t.Errorf("nothing hidden, the assumption changed: %s", all.Assumption)
	}
}
