package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// BenchmarkSteadyLatency submits at a steady rate (200/s and 1,000/s) for
// a while (60 s; JQ_LATENCY_DURATION overrides), over HTTP and over
// JQ_SUBMIT, each against a fresh system, and prints p50, p90, p99 and the
// maximum of submit→QuotaReserved: the time from just before the submission
// leaves the client to the moment the QuotaReserved event reaches a
// consumer of JQ_EVENTS. Every workload fits. Run it with
// `make bench-latency`; JQ_LATENCY_ONLY=http-1000 (or jq_submit-200, …)
// runs one of the four.
func BenchmarkSteadyLatency(b *testing.B) {
	duration := time.Minute
	if d, err := time.ParseDuration(os.Getenv("JQ_LATENCY_DURATION")); err == nil && d > 0 {
		duration = d
	}
	// JQ_LATENCY_ONLY (for example "http-1000") runs one of the four.
	only := os.Getenv("JQ_LATENCY_ONLY")
	for b.Loop() {
		for _, rate := range []int{200, 1000} {
			for _, via := range []string{"http", "jq_submit"} {
				if only != "" && only != fmt.Sprintf("%s-%d", via, rate) {
					continue
				}
				lat, lost, offered := steadyRun(b, rate, duration, via)
				if len(lat) == 0 {
					b.Fatalf("%s at %d/s: nothing admitted", via, rate)
				}
				q := func(p int) time.Duration { return lat[min(len(lat)-1, len(lat)*p/100)] }
				fmt.Printf("steady %4d/s over %-9s for %v (submitted at %.0f/s): %d admitted, %d not: submit→QuotaReserved p50 %v p90 %v p99 %v max %v\n",
					rate, via, duration, offered, len(lat), lost, q(50).Round(10*time.Microsecond), q(90).Round(10*time.Microsecond),
					q(99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
				name := fmt.Sprintf("%s-%d", via, rate)
				b.ReportMetric(float64(q(99).Microseconds())/1000, name+"-p99-ms")
			}
		}
	}
}

// steadyRun submits rate workloads a second for duration over via and
// returns the sorted latencies, how many were not admitted in time, and
// the rate the submissions actually left at (over HTTP at most 256 are in
// flight: a server that falls behind slows the sender, and a latency
// counts from when its request is sent).
func steadyRun(b *testing.B, rate int, duration time.Duration, via string) ([]time.Duration, int, float64) {
	const queues = 50
	s := start(b)
	defer s.close()
	cfg := benchQueues(queues, "1000000")
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(cfg))
	s.sync()

	nc, err := bus.Connect(s.nats, "latency")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), duration+2*time.Minute)
	defer cancel()
	n := int(float64(rate) * duration.Seconds())
	var mu sync.Mutex
	admittedAt := make(map[string]time.Time, n)
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
		now := time.Now()
		ev, err := bus.Decode(m)
		if err != nil {
			return
		}
		d := ev.Data.(*events.QuotaReservedData)
		mu.Lock()
		if _, seen := admittedAt[d.Namespace+"/"+d.Name]; !seen {
			admittedAt[d.Namespace+"/"+d.Name] = now
			if len(admittedAt) == n {
				close(done)
			}
		}
		mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	submittedAt := make([]time.Time, n)
	keys := make([]string, n)
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var inflight sync.WaitGroup
	sem := make(chan struct{}, 256)
	start := time.Now()
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i%queues), fmt.Sprintf("w%06d", i)
		keys[i] = ns + "/" + name
		body := fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, ns)
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			time.Sleep(wait)
		}
		switch via {
		case "http":
			sem <- struct{}{}
			inflight.Go(func() {
				defer func() { <-sem }()
				submittedAt[i] = time.Now()
				resp, err := httpClient.Post(s.base+"/v1/workloads", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				// Read to the end, so that the connection is kept for the
				// next request (closing an unread body closes it).
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("submit %s: %d", keys[i], resp.StatusCode)
				}
			})
		default:
			m := nats.NewMsg(ingest.SubmitSubjectOf(ns, name))
			m.Header.Set(events.HeaderSpecVersion, "1.0")
			m.Header.Set(events.HeaderID, "lat-"+name)
			m.Header.Set(events.HeaderType, ingest.SubmitType)
			m.Header.Set(events.HeaderSource, "bench")
			m.Header.Set("Nats-Msg-Id", "lat-"+name)
			m.Data = body
			submittedAt[i] = time.Now()
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	}
	inflight.Wait()
	offered := float64(n) / time.Since(start).Seconds()
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for i, k := range keys {
		if at, ok := admittedAt[k]; ok {
			lat = append(lat, at.Sub(submittedAt[i]))
		}
	}
	slices.Sort(lat)
	return lat, n - len(lat), offered
}
