package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// BenchmarkProjectBatches projects submissions and admissions in batches of
// 500 events and reports events per second: the COPY+merge path.
func BenchmarkProjectBatches(b *testing.B) {
	s, err := Open(context.Background(), testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 20_000
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		if err := s.Reset(context.Background()); err != nil {
			b.Fatal(err)
		}
		l := &log{}
		for i := range n / 2 {
			name := fmt.Sprintf("w%05d", i)
			l.submit("ns", name)
			l.add(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref("ns", name), Admission: admission(1000)})
		}
		b.StartTimer()
		start := time.Now()
		for i := 0; i < len(l.recs); i += 500 {
			if _, err := s.Apply(context.Background(), l.recs[i:min(i+500, len(l.recs))]); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "events/s")
}
