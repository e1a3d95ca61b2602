package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/e2e/internal/steady"
)

// BenchmarkSteadyLatency submits at a steady rate (200/s and 1,000/s) for
// a while (60 s; JQ_LATENCY_DURATION overrides), over HTTP and over
// JQ_SUBMIT, each against a fresh system whose services run in this one
// process, and prints p50, p90, p99 and the maximum of
// submit→QuotaReserved (see steady.Run). Every workload fits. Run it with
// `make bench-latency`, which also runs the services as separate
// processes (BenchmarkSteadyLatencyProcesses in ./chaos);
// JQ_LATENCY_ONLY=http-1000 (or jq_submit-200, …) runs one of the four;
// JQ_LATENCY_SLOW=1 lists when the workloads slower than the p99 were
// submitted (here and in ./chaos); JQ_HEAP_PROFILE=FILE writes the heap profile of the last one to FILE
// before its system stops.
func BenchmarkSteadyLatency(b *testing.B) {
	for b.Loop() {
		for _, o := range steady.FromEnv() {
			res, used := steadyRun(b, o)
			res.Print(" (one process)", o)
			n := time.Duration(max(len(res.Latencies), 1))
			fmt.Printf("  CPU per workload, from the system's start to the load's end: %v in this process (the services, the NATS server, the load's client), %v in PostgreSQL\n",
				(used.self / n).Round(time.Microsecond), (used.postgres / n).Round(time.Microsecond))
			b.ReportMetric(float64(res.Quantile(99).Microseconds())/1000, fmt.Sprintf("%s-%d-p99-ms", o.Via, o.Rate))
		}
	}
}

// steadyRun runs one steady load against a fresh in-process system, and
// reports the CPU time spent from the system's start to the load's end
// (read before the system stops: PostgreSQL's backends exit with it).
func steadyRun(b *testing.B, o steady.Options) (steady.Result, cpuUse) {
	before := readCPU()
	s := start(b)
	defer s.close()
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(steady.Queues(o.Queues, "1000000")))
	s.sync()
	o.Base, o.NATSURL = s.base, s.nats
	res, err := steady.Run(context.Background(), o)
	if err != nil {
		b.Fatalf("%s at %d/s: %v", o.Via, o.Rate, err)
	}
	used := readCPU().sub(before)
	if p := os.Getenv("JQ_HEAP_PROFILE"); p != "" {
		runtime.GC()
		f, _ := os.Create(p)
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	return res, used
}
