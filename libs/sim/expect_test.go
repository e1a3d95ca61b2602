package sim

import (
	"testing"
)

// TestExpectOfChecksEveryField: a checkpoint meets its own ExpectOf, and a
// checkpoint that differs in any one field does not.
func TestExpectOfChecksEveryField(t *testing.T) {
	base := func() Checkpoint {
		return Checkpoint{Step: 3,
			Admitted:  map[string]map[string]map[string]string{"ns/a": {"main": {"cpu": "f1"}}},
			Pending:   []string{"ns/b"},
			Evicted:   map[string]string{"ns/c": "Preempted"},
			Inactive:  []string{"ns/d"},
			Finished:  []string{"ns/e"},
			PodCounts: map[string]map[string]int32{"ns/a": {"main": 2}},
		}
	}
	ex := ExpectOf(base())
	if m := Check(3, ex, base()); len(m) != 0 {
		t.Fatalf("a checkpoint against its own expectation: %v", m)
	}
	changes := map[string]func(*Checkpoint){
		"admitted":  func(c *Checkpoint) { c.Admitted = map[string]map[string]map[string]string{} },
		"flavor":    func(c *Checkpoint) { c.Admitted["ns/a"]["main"]["cpu"] = "f2" },
		"pending":   func(c *Checkpoint) { c.Pending = nil },
		"evicted":   func(c *Checkpoint) { c.Evicted = map[string]string{} },
		"inactive":  func(c *Checkpoint) { c.Inactive = []string{"ns/b", "ns/d"} },
		"finished":  func(c *Checkpoint) { c.Finished = nil },
		"podCounts": func(c *Checkpoint) { c.PodCounts["ns/a"]["main"] = 1 },
	}
	for what, change := range changes {
		got := base()
		change(&got)
		if m := Check(3, ex, got); len(m) != 1 {
			t.Errorf("%s changed: %d mismatches %v, want 1", what, len(m), m)
		}
	}
}
