package events

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// FuzzParse decodes arbitrary bytes as the payload of every event type,
// with arbitrary ce-time and ce-jqbatch headers: Parse must never panic,
// an accepted event carries a payload of its type, and an accepted event
// re-encodes (when its payload can be encoded at all) into one that
// parses again as the same type. Services decode every event of the log
// through Parse, so a panic here would crash-loop all of them.
func FuzzParse(f *testing.F) {
	types := sortedTypes()
	ref := `{"namespace":"ns","name":"w"}`
	for _, seed := range []struct {
		typ        uint8
		body, time string
		batch      string
	}{
		{0, ref, "2026-01-01T00:00:00Z", ""},
		{1, `{"namespace":"ns","name":"w","workload":{"apiVersion":"kueue.x-k8s.io/v1beta1"},"createdAt":"2026-01-01T00:00:00Z"}`, "2026-01-01T00:00:00.5Z", "b/2"},
		{2, `{"namespace":"ns","name":"w","admission":{"clusterQueue":"cq","podSetAssignments":[{"name":"m","count":2147483647}]}}`, "2999-01-01T00:00:00Z", ""},
		{3, `{"namespace":"n\u0000s","name":"w"}`, "2026-01-01T00:00:00Z", "x/1000000"},
		{4, `{"namespace":"ns","name":"w","podSets":[{"name":"m","nodes":[{"node":"a","total":9223372036854775807}]}]}`, "bad time", ""},
		{5, `{"kind":"ClusterQueue","name":"cq","object":{"spec":{"resourceGroups":[{"flavors":[{"resources":[{"nominalQuota":"1e30"}]}]}]}}}`, "2026-01-01T00:00:00Z", "/"},
		{6, `[1,2,3]`, "2026-01-01T00:00:00Z", ""},
		{7, `{"namespace":"ns","name":"w","victims":[` + ref + `],"unknown":1}`, "2026-01-01T00:00:00Z", ""},
		{8, ``, "", ""},
		{9, `null`, "0000-01-01T00:00:00Z", "a/0"},
	} {
		f.Add(seed.typ, []byte(seed.body), seed.time, seed.batch)
	}
	f.Fuzz(func(t *testing.T, typ uint8, body []byte, ceTime, batch string) {
		want := types[int(typ)%len(types)]
		header := map[string]string{
			HeaderSpecVersion: "1.0", HeaderID: "id", HeaderType: string(want),
			HeaderSource: "fuzz", HeaderTime: ceTime, HeaderBatch: batch,
		}
		e, err := Parse(func(k string) string { return header[k] }, body)
		if err != nil {
			return
		}
		if e.Type != want || e.Data == nil {
			t.Fatalf("accepted %s with payload %T", e.Type, e.Data)
		}
		again, err := e.Body()
		if err != nil {
			return // e.g. a year beyond 9999: encoding/json refuses it
		}
		header[HeaderTime] = e.Time.UTC().Format(time.RFC3339Nano)
		if _, err := time.Parse(time.RFC3339Nano, header[HeaderTime]); err != nil {
			return // a time that has no RFC 3339 form
		}
		e2, err := Parse(func(k string) string { return header[k] }, again)
		if err != nil {
			t.Fatalf("re-encoded %s does not parse: %v\n%s", want, err, again)
		}
		if e2.Type != want || !json.Valid(again) {
			t.Fatalf("re-encoded %s became %s", want, e2.Type)
		}
	})
}

// sortedTypes lists the event types in a fixed order, so a fuzz input
// names the same type on every run.
func sortedTypes() []Type {
	ts := Types()
	slices.Sort(ts)
	return ts
}
