package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/e2e/internal/steady"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// serverMessages is what the server has received and sent, in messages.
func serverMessages(b *testing.B, srv *server.Server) int64 {
	v, err := srv.Varz(nil)
	if err != nil {
		b.Fatal(err)
	}
	return v.InMsgs + v.OutMsgs
}

// connMessages is what the server has received from and sent to each
// client connection, by connection name (several of a name summed).
func connMessages(b *testing.B, srv *server.Server) map[string][2]int64 {
	cz, err := srv.Connz(&server.ConnzOptions{Limit: 10_000})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, c := range cz.Conns {
		m := out[c.Name]
		m[0] += c.InMsgs
		m[1] += c.OutMsgs
		out[c.Name] = m
	}
	return out
}

// perConnection renders what each connection carried between two
// connMessages readings, per workload: in (its publishes, acks and pull
// requests) and out (deliveries and replies).
func perConnection(before, after map[string][2]int64, n int) string {
	names := slices.Sorted(maps.Keys(after))
	parts := make([]string, 0, len(names))
	for _, name := range names {
		in := float64(after[name][0]-before[name][0]) / float64(n)
		out := float64(after[name][1]-before[name][1]) / float64(n)
		parts = append(parts, fmt.Sprintf("%s %.1f in + %.1f out", name, in, out))
	}
	return strings.Join(parts, ", ")
}

// chainRun is what a bare chain measured: events a second (3 per message
// through it), the messages the server carried per event, and this
// process's CPU per message through all three hops.
type chainRun struct {
	rate, msgsPerEvent float64
	cpuPerMessage      time.Duration
}

// bareChain measures, on the NATS server srv, what a bare 3-hop JetStream
// chain carries: n messages of a workload's size published asynchronously
// to one stream, each consumed and published to a second, then to a
// third, and consumed there. It is what the pipeline's three hops
// (submit, Created, QuotaReserved) would cost with no work at each.
func bareChain(b *testing.B, srv *server.Server, n int) chainRun {
	nc, err := bus.Connect(srv.ClientURL(), "bare-chain")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, hop := range []string{"a", "b", "c"} {
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "BARE_" + strings.ToUpper(hop), Subjects: []string{"bare." + hop}}); err != nil {
			b.Fatal(err)
		}
	}
	relay := func(from, to string) jetstream.ConsumeContext {
		cons, err := js.OrderedConsumer(ctx, "BARE_"+strings.ToUpper(from), jetstream.OrderedConsumerConfig{})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if _, err := js.PublishAsync("bare."+to, m.Data(), jetstream.WithStallWait(time.Minute)); err != nil {
				b.Error(err)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		return cc
	}
	defer relay("a", "b").Stop()
	defer relay("b", "c").Stop()
	got := make(chan struct{})
	var count int
	last, err := js.OrderedConsumer(ctx, "BARE_C", jetstream.OrderedConsumerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := last.Consume(func(m jetstream.Msg) {
		if count++; count == n {
			close(got)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	body := make([]byte, 400)
	before, cpu := serverMessages(b, srv), readCPU()
	start := time.Now()
	for range n {
		if _, err := js.PublishAsync("bare.a", body, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-ctx.Done():
		b.Fatalf("bare chain: %d of %d through", count, n)
	}
	return chainRun{
		rate:          3 * float64(n) / time.Since(start).Seconds(),
		msgsPerEvent:  float64(serverMessages(b, srv)-before) / (3 * float64(n)),
		cpuPerMessage: readCPU().sub(cpu).self / time.Duration(n),
	}
}

// burstProfile starts a CPU profile of this process (every service, the
// NATS server and the bench's own client) written to the file
// JQ_BURST_PROFILE names, if it names one, and returns its stop.
func burstProfile(b *testing.B) func() {
	path := os.Getenv("JQ_BURST_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEndToEnd submits 20,000 workloads over NATS (durable JQ_SUBMIT
// publishes) to 50 ClusterQueues in 10 cohorts, all fitting, and reports
// admitted workloads per second, submit→admitted latency (p50, p99) and
// how long the projection trails the last admission, then measures a bare
// 3-hop JetStream chain on the same server and prints the ratio of
// admitted/s to the chain's events/s ÷ 3, with the messages the server
// carried per workload, in all and by client connection. Run it with
// `make bench-e2e`; JQ_BURST_PROFILE=FILE writes a CPU profile of the
// burst, from the first submission to the last admission.
func BenchmarkEndToEnd(b *testing.B) {
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
		msgs, conns := serverMessages(b, s.srv), connMessages(b, s.srv)
		stopProfile, cpu := burstProfile(b), readCPU()
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
		stopProfile()
		burstCPU := readCPU().sub(cpu)
		s.sync()
		projectionLag := time.Since(allAdmitted)
		// Everything the burst made the server carry, up to the
		// projection's last write: each service's reads and writes.
		perWorkload := float64(serverMessages(b, s.srv)-msgs) / n
		byConn := perConnection(conns, connMessages(b, s.srv), n)
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
		chain := bareChain(b, s.srv, n)
		admitted := float64(n) / last.Sub(start).Seconds()
		b.ReportMetric(chain.rate, "bare-chain-events/s")
		b.ReportMetric(admitted/(chain.rate/3), "ratio-to-bare-chain")
		b.ReportMetric(perWorkload, "server-msgs/workload")
		fmt.Printf("burst of %d: %.0f admitted/s; a bare 3-hop JetStream chain on the same server, right after: %.0f events/s (÷3 = %.0f/s); ratio %.2f\n",
			n, admitted, chain.rate, chain.rate/3, admitted/(chain.rate/3))
		fmt.Printf("the NATS server carried %.1f messages (in and out) per admitted workload, %.1f per event of the bare chain (%.1f per 3 hops)\n",
			perWorkload, chain.msgsPerEvent, 3*chain.msgsPerEvent)
		perAdmitted := burstCPU.self / n
		fmt.Printf("CPU per admitted workload: %v in this process (the services, the NATS server, the bench's client) and %v in PostgreSQL; the bare chain: %v per message through its 3 hops, %v per server message\n",
			perAdmitted.Round(time.Microsecond), (burstCPU.postgres / n).Round(time.Microsecond),
			chain.cpuPerMessage.Round(time.Microsecond), (chain.cpuPerMessage / time.Duration(3*chain.msgsPerEvent)).Round(100*time.Nanosecond))
		fmt.Printf("  by connection, per workload: %s\n", byConn)
		s.close()
	}
}
