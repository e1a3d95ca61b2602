// Package steady submits workloads at a steady rate and measures each
// one's submit→QuotaReserved latency: the latency benchmarks run it
// against the services in one process (package e2e) and as separate
// processes (package chaos), as a deployment runs them.
package steady

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// Options say where to submit and how fast.
type Options struct {
	// Base is ingest's HTTP API, NATSURL the NATS server.
	Base, NATSURL string
	// Rate is submissions a second, for Duration.
	Rate     int
	Duration time.Duration
	// Via is "http" (POST /v1/workloads) or "jq_submit" (a durable
	// submission published to JQ_SUBMIT).
	Via string
	// Queues is how many LocalQueues the workloads are spread over, one
	// per namespace ns-0 … (as Queues writes them).
	Queues int
}

// FromEnv lists the runs of make bench-latency: 200/s and 1,000/s, over
// HTTP and over JQ_SUBMIT, 60 s each (JQ_LATENCY_DURATION overrides), or
// only the one JQ_LATENCY_ONLY names (for example "http-1000"); 50
// queues. Base and NATSURL are left to the caller.
func FromEnv() []Options {
	duration := time.Minute
	if d, err := time.ParseDuration(os.Getenv("JQ_LATENCY_DURATION")); err == nil && d > 0 {
		duration = d
	}
	only := os.Getenv("JQ_LATENCY_ONLY")
	var out []Options
	for _, rate := range []int{200, 1000} {
		for _, via := range []string{"http", "jq_submit"} {
			if only == "" || only == fmt.Sprintf("%s-%d", via, rate) {
				out = append(out, Options{Rate: rate, Duration: duration, Via: via, Queues: 50})
			}
		}
	}
	return out
}

// Result is one run's latencies.
type Result struct {
	// Latencies are the admitted workloads' submit→QuotaReserved, sorted.
	Latencies []time.Duration
	// Ingest are the same workloads' submit→WorkloadSubmitted (the part
	// before admission reads it), sorted; Windows the p99 of Latencies
	// over each ten seconds of submissions, in order, which shows
	// whether the tail grows as the admitted workloads pile up.
	Ingest  []time.Duration
	Windows []time.Duration
	// Slow are the workloads slower than the p99, in submission order:
	// when each was submitted (since the first submission) and how its
	// latency splits, to tell a pause of the whole process (ingest slow
	// too) from admission alone falling behind.
	Slow []Slow
	// Refused counts the submissions ingest answered 503 (admission too
	// far behind: it sheds load past --max-admission-lag); Lost the
	// accepted workloads not admitted within two minutes of the end;
	// Offered is the rate the submissions actually left at.
	Refused, Lost int
	Offered       float64
}

// Print prints Line and, with JQ_LATENCY_SLOW set, SlowReport.
func (r Result) Print(what string, o Options) {
	fmt.Println(r.Line(what, o))
	if os.Getenv("JQ_LATENCY_SLOW") != "" {
		fmt.Print(r.SlowReport())
	}
}

// Slow is one workload slower than the p99.
type Slow struct {
	At, Ingest, Total time.Duration
}

// SlowReport lists the slow workloads grouped by the second they were
// submitted in: how many, and their median ingest and total latency.
func (r Result) SlowReport() string {
	var b strings.Builder
	for i := 0; i < len(r.Slow); {
		sec := r.Slow[i].At.Truncate(time.Second)
		j := i
		var ingest, total []time.Duration
		for ; j < len(r.Slow) && r.Slow[j].At.Truncate(time.Second) == sec; j++ {
			ingest, total = append(ingest, r.Slow[j].Ingest), append(total, r.Slow[j].Total)
		}
		slices.Sort(ingest)
		slices.Sort(total)
		fmt.Fprintf(&b, "  at %3ds: %4d slower than p99, median ingest %v of %v\n", int(sec.Seconds()), j-i,
			quantile(ingest, 50).Round(100*time.Microsecond), quantile(total, 50).Round(100*time.Microsecond))
		i = j
	}
	return b.String()
}

// Quantile is the p-th percentile of the latencies.
func (r Result) Quantile(p int) time.Duration { return quantile(r.Latencies, p) }

// quantile is the p-th percentile of sorted durations.
func quantile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// Line is the result as the benchmarks print it.
func (r Result) Line(what string, o Options) string {
	if len(r.Latencies) == 0 {
		return fmt.Sprintf("steady %4d/s over %-9s for %v%s: nothing admitted", o.Rate, o.Via, o.Duration, what)
	}
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	var windows []string
	for _, w := range r.Windows {
		windows = append(windows, round(w).String())
	}
	return fmt.Sprintf("steady %4d/s over %-9s for %v%s (submitted at %.0f/s): %d admitted, %d not, %d refused (503): submit→QuotaReserved p50 %v p90 %v p99 %v max %v; of which submit→WorkloadSubmitted p50 %v p99 %v; p99 per 10 s [%s]",
		o.Rate, o.Via, o.Duration, what, r.Offered, len(r.Latencies), r.Lost, r.Refused, round(r.Quantile(50)), round(r.Quantile(90)),
		round(r.Quantile(99)), round(r.Latencies[len(r.Latencies)-1]), round(quantile(r.Ingest, 50)), round(quantile(r.Ingest, 99)),
		strings.Join(windows, " "))
}

// Queues is the configuration the load runs against: n ClusterQueues of
// quota cpu each in cohorts of ten, and a LocalQueue lq in each namespace
// ns-<i> pointing at cq-<i>.
func Queues(n int, quota string) string {
	var cfg strings.Builder
	cfg.WriteString("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n")
	for q := range n {
		fmt.Fprintf(&cfg, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-%[1]d}
spec:
  cohort: cohort-%[2]d
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: "%[3]s"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns-%[1]d}
spec: {clusterQueue: cq-%[1]d}
`, q, q%10, quota)
	}
	return cfg.String()
}

// Run submits o.Rate workloads a second for o.Duration, each asking for
// one cpu of a queue with room for all, and waits for their
// QuotaReserved events on JQ_EVENTS. A latency counts from just before
// the submission leaves (over HTTP at most 256 are in flight: a server
// that falls behind slows the sender) to the moment its QuotaReserved
// reaches this consumer.
func Run(ctx context.Context, o Options) (Result, error) {
	nc, err := bus.Connect(o.NATSURL, "latency")
	if err != nil {
		return Result{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration+2*time.Minute)
	defer cancel()
	n := int(float64(o.Rate) * o.Duration.Seconds())
	var mu sync.Mutex
	admittedAt := make(map[string]time.Time, n)
	submittedSeen := make(map[string]time.Time, n)
	cons, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"jq.ev.wl.>"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return Result{}, err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		if m.Headers().Get(events.HeaderType) == string(events.WorkloadSubmitted) {
			mu.Lock()
			defer mu.Unlock()
			if _, seen := submittedSeen[m.Subject()]; !seen {
				submittedSeen[m.Subject()] = now
			}
			return
		}
		if m.Headers().Get(events.HeaderType) != string(events.QuotaReserved) {
			return
		}
		ev, err := bus.Decode(m)
		if err != nil {
			return
		}
		d := ev.Data.(*events.QuotaReservedData)
		mu.Lock()
		defer mu.Unlock()
		if _, seen := admittedAt[d.Namespace+"/"+d.Name]; !seen {
			admittedAt[d.Namespace+"/"+d.Name] = now
		}
	})
	if err != nil {
		return Result{}, err
	}
	defer cc.Stop()

	submittedAt := make([]time.Time, n)
	keys := make([]string, n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var inflight sync.WaitGroup
	var failed error
	var failedOnce sync.Once
	var refused atomic.Int64
	fail := func(err error) { failedOnce.Do(func() { failed = err }) }
	sem := make(chan struct{}, 256)
	start := time.Now()
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i%o.Queues), fmt.Sprintf("w%06d", i)
		keys[i] = ns + "/" + name
		body := fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`, name, ns)
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(o.Rate))); wait > 0 {
			time.Sleep(wait)
		}
		switch o.Via {
		case "http":
			sem <- struct{}{}
			inflight.Go(func() {
				defer func() { <-sem }()
				submittedAt[i] = time.Now()
				resp, err := client.Post(o.Base+"/v1/workloads", "application/json", bytes.NewReader(body))
				if err != nil {
					fail(err)
					return
				}
				// Read to the end, so that the connection is kept for the
				// next request (closing an unread body closes it).
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Add(1)
					return
				}
				if resp.StatusCode != http.StatusAccepted {
					fail(fmt.Errorf("submit %s: %d", keys[i], resp.StatusCode))
				}
			})
		case "jq_submit":
			m := nats.NewMsg(ingest.SubmitSubjectOf(ns, name))
			m.Header.Set(events.HeaderSpecVersion, "1.0")
			m.Header.Set(events.HeaderID, "lat-"+name)
			m.Header.Set(events.HeaderType, ingest.SubmitType)
			m.Header.Set(events.HeaderSource, "bench")
			m.Header.Set("Nats-Msg-Id", "lat-"+name)
			m.Data = body
			submittedAt[i] = time.Now()
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				return Result{}, err
			}
		default:
			return Result{}, fmt.Errorf("via %q: want http or jq_submit", o.Via)
		}
	}
	inflight.Wait()
	if failed != nil {
		return Result{}, failed
	}
	offered := float64(n) / time.Since(start).Seconds()
	accepted := n - int(refused.Load())
	for ctx.Err() == nil {
		mu.Lock()
		all := len(admittedAt) >= accepted
		mu.Unlock()
		if all {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, n)
	var ingested []time.Duration
	var window []time.Duration
	var windows []time.Duration
	perWindow := 10 * o.Rate
	for i, k := range keys {
		if at, ok := admittedAt[k]; ok {
			lat = append(lat, at.Sub(submittedAt[i]))
			window = append(window, at.Sub(submittedAt[i]))
			ns, name, _ := strings.Cut(k, "/")
			if at, ok := submittedSeen[events.WorkloadSubject(ns, name)]; ok {
				ingested = append(ingested, at.Sub(submittedAt[i]))
			}
		}
		if (i+1)%perWindow == 0 || i == n-1 {
			slices.Sort(window)
			windows = append(windows, quantile(window, 99))
			window = window[:0]
		}
	}
	slices.Sort(lat)
	slices.Sort(ingested)
	res := Result{Latencies: lat, Ingest: ingested, Windows: windows, Refused: n - accepted, Lost: accepted - len(lat), Offered: offered}
	p99 := res.Quantile(99)
	for i, k := range keys {
		at, ok := admittedAt[k]
		if !ok || at.Sub(submittedAt[i]) <= p99 {
			continue
		}
		ns, name, _ := strings.Cut(k, "/")
		res.Slow = append(res.Slow, Slow{At: submittedAt[i].Sub(start), Ingest: submittedSeen[events.WorkloadSubject(ns, name)].Sub(submittedAt[i]),
			Total: at.Sub(submittedAt[i])})
	}
	if len(lat) == 0 {
		return res, errors.New("nothing admitted")
	}
	return res, nil
}
