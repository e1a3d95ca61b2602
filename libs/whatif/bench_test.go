package whatif

import (
	"testing"
	"time"
)

// BenchmarkWhatIf100k replays a recorded history of 100,000 workloads
// (two queues of a cohort, 450 cpu each, about 80% busy over three days)
// with the quota of one queue doubled. The setup records the history
// through the same core first; only the what-if is timed.
func BenchmarkWhatIf100k(b *testing.B) {
	span := 72 * time.Hour
	r := record(b, flavor+queue("a", "c", "450")+queue("b", "c", "450"), trace(11, benchN, span), t0.Add(span+12*time.Hour))
	cfg := objects(b, queue("a", "c", "900"))[:1]
	b.ResetTimer()
	for b.Loop() {
		rep, err := Run(r.Log, Options{From: t0, To: t0.Add(span + 12*time.Hour), Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Steps), "steps")
		b.ReportMetric(float64(len(r.Log)), "events")
	}
}

// benchN is the number of workloads BenchmarkWhatIf100k records.
var benchN = 100_000
