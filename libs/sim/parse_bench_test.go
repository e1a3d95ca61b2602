package sim

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
)

// BenchmarkParse reads the scenario file named by JQ_SCENARIO (for example
// the difftest's 20k scenario, `make bench-decode`) as before the one
// decode (the whole file as JSON text, each manifest through the reference
// decode) and with it, and prints the CPU of each and their ratio.
func BenchmarkParse(b *testing.B) {
	path := os.Getenv("JQ_SCENARIO")
	if path == "" {
		b.Skip("set JQ_SCENARIO to a scenario file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var per [2]time.Duration
	for i, p := range []struct {
		name string
		fn   func([]byte) (*Scenario, error)
	}{{"before", func(d []byte) (*Scenario, error) { return parseWith(d, api.DecodeReference) }}, {"one-decode", Parse}} {
		b.Run(p.name, func(b *testing.B) {
			start := cpuTime(b)
			for b.Loop() {
				if _, err := p.fn(data); err != nil {
					b.Fatal(err)
				}
			}
			per[i] = (cpuTime(b) - start) / time.Duration(b.N)
			b.ReportMetric(float64(per[i].Nanoseconds()), "cpu-ns/op")
		})
	}
	if per[1] > 0 {
		fmt.Printf("parse %s: before %v CPU, one decode %v CPU: %.1f× less\n", path, per[0], per[1], float64(per[0])/float64(per[1]))
	}
}
