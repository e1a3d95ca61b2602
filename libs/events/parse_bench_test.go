package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkParse decodes a WorkloadSubmitted event as ingest writes it,
// with Parse and with the encoding/json decode Parse used before, in the
// same run, and reports both and their ratio.
func BenchmarkParse(b *testing.B) {
	wl := `{"kind":"Workload","apiVersion":"kueue.x-k8s.io/v1beta1","metadata":{"name":"w00001","namespace":"ns-1","uid":"0123456789abcdef"},` +
		`"spec":{"podSets":[{"name":"main","template":{"metadata":{},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}},"count":1}],"queueName":"lq","active":true}}`
	ev := Event{ID: "abcdefghijkl", Type: WorkloadSubmitted, Source: "jetqueue/ingest", Time: time.Now().UTC(), Subject: "jq.ev.wl.ns-1.w00001",
		Data: &WorkloadSubmittedData{WorkloadRef: WorkloadRef{Namespace: "ns-1", Name: "w00001"}, Workload: json.RawMessage(wl),
			CreatedAt: time.Now().UTC(), RequestDigest: "sha256:0123456789abcdef0123456789abcdef"}}
	body, err := ev.Body()
	if err != nil {
		b.Fatal(err)
	}
	h := ev.Headers()
	header := func(k string) string { return h[k] }
	var before, now time.Duration
	for b.Loop() {
		t0 := time.Now()
		var d WorkloadSubmittedData
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := Parse(header, body); err != nil {
			b.Fatal(err)
		}
		before, now = before+t1.Sub(t0), now+time.Since(t1)
	}
	b.ReportMetric(float64(before.Nanoseconds())/float64(b.N), "encoding/json-ns/event")
	b.ReportMetric(float64(now.Nanoseconds())/float64(b.N), "Parse-ns/event")
	b.ReportMetric(float64(before)/float64(now), "speedup")
}
