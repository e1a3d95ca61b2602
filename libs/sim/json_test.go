package sim

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendJSONMatchesEncoder: the hand-written encoding of a checkpoint
// is byte for byte what encoding/json's Encoder writes, including strings
// that need escaping (quotes, HTML, control characters, non-ASCII and
// invalid UTF-8), empty and nil maps and slices.
func TestAppendJSONMatchesEncoder(t *testing.T) {
	odd := []string{"ns/a", `q"uote`, `back\slash`, "<tag>&amp", "tab\tnew\nline\x01", "héllo", "\u2028", "bad\xffutf8", ""}
	cases := []Checkpoint{
		{},
		{Step: 3, Admitted: map[string]map[string]map[string]string{}, Pending: []string{}, Evicted: map[string]string{},
			Inactive: []string{}, Finished: []string{}},
		{Step: 12, Admitted: map[string]map[string]map[string]string{
			"ns/b": {"main": {"cpu": "f1", "memory": "f1"}, "aux": {"nvidia.com/gpu": "a100"}},
			"ns/a": {"main": nil},
			"ns/c": nil,
		}, Pending: []string{"ns/z", "ns/y"}, Evicted: map[string]string{"ns/x": "Preempted", "ns/w": "PodsReadyTimeout"},
			Finished: []string{"ns/v"}},
	}
	for _, s := range odd {
		cases = append(cases, Checkpoint{Step: -1, Admitted: map[string]map[string]map[string]string{s: {s: {s: s}}},
			Pending: []string{s}, Evicted: map[string]string{s: s}, Inactive: []string{s}, Finished: []string{s, s}})
	}
	for i, cp := range cases {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(cp); err != nil {
			t.Fatal(err)
		}
		if got := cp.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want.Bytes())
		}
	}
}
