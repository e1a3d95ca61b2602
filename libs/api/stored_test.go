package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// steadyWorkload is the workload the latency and burst benchmarks submit.
const steadyWorkload = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w00001","namespace":"ns-1"},
"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`

// TestDecodeStoredAsEncodingJSON decodes what ingest stores for each
// sample workload as encoding/json does, the common shape by hand.
func TestDecodeStoredAsEncodingJSON(t *testing.T) {
	for _, doc := range []string{steadyWorkload,
		`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"ns","labels":{"a":"b"},"annotations":{"x":"y"}},
"spec":{"queueName":"lq","priorityClassName":"high","priority":7,"active":false,"podSets":[{"name":"a","count":3,"minCount":1,
"template":{"spec":{"nodeSelector":{"zone":"z"},"tolerations":[{"key":"k","operator":"Exists"}],"initContainers":[{"name":"i","resources":{"requests":{"memory":"1Gi"}}}],
"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","example.com/gpu":"2"},"limits":{"cpu":"1"}}}]}}}]}}`} {
		objs, err := Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		wl := objs[0].(*Workload)
		wl.UID = "u-1" // as ingest stores it: a UID, no creation timestamp
		raw, err := json.Marshal(wl)
		if err != nil {
			t.Fatal(err)
		}
		var want Workload
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if _, read := readWorkload(raw); !read && doc == steadyWorkload {
			t.Errorf("the reader gives up on the common shape as ingest stores it:\n%s", raw)
		}
		got, err := DecodeStored(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&want, got); d != "" {
			t.Errorf("DecodeStored differs from encoding/json (-want +got):\n%s", d)
		}
	}
	if _, err := DecodeStored([]byte(`{"spec":{"podSets":[{"count":"x"}]}}`)); err == nil {
		t.Error("a count written as a string decoded")
	}
}

// BenchmarkDecodeStored decodes a stored workload with DecodeStored and
// with encoding/json in the same run, and reports both and their ratio.
func BenchmarkDecodeStored(b *testing.B) {
	objs, err := Decode([]byte(steadyWorkload))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(objs[0])
	var before, now time.Duration
	for b.Loop() {
		t0 := time.Now()
		var wl Workload
		if err := json.Unmarshal(raw, &wl); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := DecodeStored(raw); err != nil {
			b.Fatal(err)
		}
		before, now = before+t1.Sub(t0), now+time.Since(t1)
	}
	b.ReportMetric(float64(before.Nanoseconds())/float64(b.N), "encoding/json-ns/op")
	b.ReportMetric(float64(now.Nanoseconds())/float64(b.N), "DecodeStored-ns/op")
	b.ReportMetric(float64(before)/float64(now), "speedup")
}
