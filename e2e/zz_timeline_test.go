package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/e2e/internal/steady"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

func zzTimeline(b *testing.B, url string) {
	nc, _ := bus.Connect(url, "zz")
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for _, st := range []string{"JQ_SUBMIT", events.Stream} {
		str, err := js.Stream(ctx, st)
		if err != nil { b.Log(err); continue }
		cons, err := str.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil { b.Log(err); continue }
		var t0 time.Time
		buckets := map[string]map[int]int{}
		for {
			m, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err != nil { break }
			md, _ := m.Metadata()
			if t0.IsZero() { t0 = md.Timestamp }
			typ := m.Headers().Get(events.HeaderType)
			if buckets[typ] == nil { buckets[typ] = map[int]int{} }
			buckets[typ][int(md.Timestamp.Sub(t0)/(250*time.Millisecond))]++
			if md.NumPending == 0 { break }
		}
		for typ, bk := range buckets {
			var keys []int
			for k := range bk { keys = append(keys, k) }
			slices.Sort(keys)
			line := ""
			for _, k := range keys { line += fmt.Sprintf(" %d:%d", k, bk[k]) }
			fmt.Printf("%s %s%s\n", st, typ, line)
		}
	}
}

func BenchmarkZZTimeline(b *testing.B) {
	const n, queues = 20_000, 50
	for b.Loop() {
		s := start(b)
		cfg := steady.Queues(queues, "1000")
		s.must(http.StatusOK, "POST", "/v1/apply", []byte(cfg))
		s.sync()

		nc, err := bus.Connect(s.nats, "bench")
		if err != nil {
			b.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		var mu sync.Mutex
		admittedAt := map[string]time.Time{}
		done := make(chan struct{})
		cons, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"jq.ev.wl.>"}, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if m.Headers().Get(events.HeaderType) != string(events.QuotaReserved) {
				return
			}
			ev, err := bus.Decode(m)
			if err != nil {
				return
			}
			d := ev.Data.(*events.QuotaReservedData)
			mu.Lock()
			admittedAt[d.Namespace+"/"+d.Name] = time.Now()
			if len(admittedAt) == n {
				close(done)
			}
			mu.Unlock()
		})
		if err != nil {
			b.Fatal(err)
		}
		submittedAt := make(map[string]time.Time, n)
		start := time.Now()
		for i := range n {
			ns, name := fmt.Sprintf("ns-%d", i%queues), fmt.Sprintf("w%05d", i)
			m := nats.NewMsg(ingest.SubmitSubjectOf(ns, name))
			m.Header.Set(events.HeaderSpecVersion, "1.0")
			m.Header.Set(events.HeaderID, "bench-"+name)
			m.Header.Set(events.HeaderType, ingest.SubmitType)
			m.Header.Set(events.HeaderSource, "bench")
			m.Header.Set("Nats-Msg-Id", "bench-"+name)
			m.Data = fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, ns)
			submittedAt[ns+"/"+name] = time.Now()
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal("submissions not acknowledged")
		}
		submitted := time.Since(start)
		select {
		case <-done:
		case <-ctx.Done():
			mu.Lock()
			b.Fatalf("only %d of %d admitted", len(admittedAt), n)
		}
		allAdmitted := time.Now()
		s.sync()
		projectionLag := time.Since(allAdmitted)
		cc.Stop()
		cancel()
		nc.Close()

		var lat []time.Duration
		var last time.Time
		for k, t := range admittedAt {
			lat = append(lat, t.Sub(submittedAt[k]))
			if t.After(last) {
				last = t
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(n)/last.Sub(start).Seconds(), "admitted/s")
		b.ReportMetric(float64(n)/submitted.Seconds(), "submitted/s")
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
		b.ReportMetric(float64(projectionLag.Milliseconds()), "projection-lag-ms")
		zzTimeline(b, s.nats)
		s.close()
	}
}
