package api

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workloadsYAML is n Workloads in the shape of the difftest's big scenario
// (../shared/difftest/big-scenario.py), as one YAML stream.
func workloadsYAML(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, `apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: w%d
  namespace: ns-%d-%d
spec:
  queueName: lq
  priority: %d
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources:
            requests:
              cpu: '%d'
              memory: %dGi
`, i, i%10, i%6, (i%3)*50, 1+i%4, 2*(1+i%4))
	}
	return []byte(b.String())
}

// workloadsJSON is the same as a JSON array.
func workloadsJSON(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w%d","namespace":"ns-%d-%d"},"spec":{"queueName":"lq","priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d","memory":"%dGi"}}}]}}}]}}`,
			i, i%10, i%6, (i%3)*50, 1+i%4, 2*(1+i%4))
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// cpuTime is the CPU this process has used (all threads, GC included): on
// a shared machine wall time measures the neighbours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecode times the reference decode (every document read about
// six times over) and the one decode on the same inputs, and prints their
// ratio: `cd libs && go test -run '^$' -bench Decode ./api`.
func BenchmarkDecode(b *testing.B) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"yaml-1000-workloads", workloadsYAML(MaxDocuments)},
		{"json-1000-workloads", workloadsJSON(MaxDocuments)},
		{"json-1-workload", []byte(strings.Trim(string(workloadsJSON(1)), "[]"))},
	}
	for _, in := range inputs {
		var per [2]time.Duration
		for i, dec := range []struct {
			name string
			fn   func([]byte) ([]Object, error)
		}{{"reference", decodeReference}, {"one-decode", Decode}} {
			b.Run(in.name+"/"+dec.name, func(b *testing.B) {
				start := cpuTime()
				for b.Loop() {
					if _, err := dec.fn(in.data); err != nil {
						b.Fatal(err)
					}
				}
				per[i] = (cpuTime() - start) / time.Duration(b.N)
				b.ReportMetric(float64(per[i].Nanoseconds()), "cpu-ns/op")
			})
		}
		if per[1] > 0 {
			fmt.Printf("decode %s: reference %v CPU, one decode %v CPU: %.1f× less\n", in.name, per[0], per[1], float64(per[0])/float64(per[1]))
		}
	}
}

// BenchmarkValidate times Validate of one typical Workload (the big
// scenario's shape: one podSet, one container, cpu and memory requests):
// `cd libs && go test -run '^$' -bench Validate -benchmem ./api`.
func BenchmarkValidate(b *testing.B) {
	objs, err := Decode([]byte(strings.Trim(string(workloadsJSON(1)), "[]")))
	if err != nil || len(objs) != 1 {
		b.Fatal(objs, err)
	}
	wl := objs[0]
	start := cpuTime()
	for b.Loop() {
		if err := Validate(wl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
