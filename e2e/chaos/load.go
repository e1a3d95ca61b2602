package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
)

// Namespace is where every workload of the suite lives.
const Namespace = "chaos"

// setup is the capacity, in Kueue's performance-test shape: cohorts of
// ClusterQueues that reclaim within the cohort (Any) and preempt lower
// priorities within the queue, BestEffortFIFO, two flavors, no
// lendingLimit (so the checker's bounds are exact) and a borrowingLimit on
// the first queue of each cohort (so the per-queue bound is checked too).
func setup(cohorts, queues int) (yaml string, cqs []string) {
	var b strings.Builder
	for _, f := range []string{"on-demand", "spot"} {
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: %s}\n", f)
	}
	for c := range cohorts {
		for q := range queues {
			name := fmt.Sprintf("cq-%d-%d", c, q)
			cqs = append(cqs, name)
			borrow := ""
			if q == 0 {
				borrow = `, borrowingLimit: "5"`
			}
			fmt.Fprintf(&b, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  cohort: cohort-%[2]d
  namespaceSelector: {}
  queueingStrategy: BestEffortFIFO
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: "10"%[3]s}
      - {name: memory, nominalQuota: 40Gi}
    - name: spot
      resources:
      - {name: cpu, nominalQuota: "5"}
      - {name: memory, nominalQuota: 20Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: %[1]s, namespace: %[4]s}
spec: {clusterQueue: %[1]s}
`, name, c, borrow, Namespace)
		}
	}
	return b.String(), cqs
}

// size is one of the performance test's workload classes.
type size struct {
	name     string
	weight   int // out of 10
	pods     int
	cpu, mem string
	priority int32
}

var sizes = []size{
	{"small", 6, 1, "1", "1Gi", 50},
	{"medium", 3, 5, "1", "1Gi", 100},
	{"large", 1, 4, "3", "3Gi", 200},
}

func pickSize(rng *rand.Rand) size {
	n := rng.IntN(10)
	for _, s := range sizes {
		if n < s.weight {
			return s
		}
		n -= s.weight
	}
	return sizes[0]
}

func workloadJSON(name, lq string, s size) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},
"spec":{"queueName":%q,"priority":%d,"podSets":[{"name":"main","count":%d,"template":{"spec":{"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":%q,"memory":%q}}}]}}}]}}`,
		name, Namespace, lq, s.priority, s.pods, s.cpu, s.mem)
}

// load is the steady load: submissions at a rate, each workload finished
// a random 0-500 ms after the load sees it admitted, priority changes.
// It rides through the faults: a request without an answer, or with a
// 5xx, is tried again (a submission with the same Idempotency-Key), on
// the next ingest instance.
type load struct {
	bases  []string
	client *http.Client
	seed   uint64
	cqs    []string
	rate   float64
	// onAnswer, when set, hears every answer retry gets (status 0: none),
	// so that a suite can account for each one the client saw.
	onAnswer func(method, path string, header map[string]string, status int, body []byte)

	mu       sync.Mutex
	rng      *rand.Rand
	sent     map[Key]Outcome
	live     []Key // submitted, for priority changes
	finished map[Key]int
	refusals []string

	next        atomic.Uint64
	submissions sync.WaitGroup
	finishes    sync.WaitGroup
	stats       struct{ retries, finishes, priorities atomic.Int64 }
}

func newLoad(bases []string, cqs []string, seed uint64, rate float64) *load {
	return &load{bases: bases, cqs: cqs, seed: seed, rate: rate, client: &http.Client{Timeout: 15 * time.Second},
		rng: rand.New(rand.NewPCG(seed, 1)), sent: map[Key]Outcome{}, finished: map[Key]int{}}
}

// intN draws from the seeded source; goroutines share it.
func (l *load) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

// do sends one request to ingest instance i (mod their number) and
// returns the status and body; status 0 is no answer.
func (l *load) do(ctx context.Context, i int, method, path string, body []byte, header map[string]string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, method, l.bases[i%len(l.bases)]+path, bytes.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// retry sends a request until it gets an answer that is not a 5xx,
// moving to the next ingest instance after each failure, with a capped
// backoff. It returns 0 when ctx ends first.
func (l *load) retry(ctx context.Context, method, path string, body []byte, header map[string]string) (int, []byte) {
	wait := 50 * time.Millisecond
	for i := l.intN(len(l.bases)); ; i++ {
		status, data := l.do(ctx, i, method, path, body, header)
		if l.onAnswer != nil && ctx.Err() == nil {
			l.onAnswer(method, path, header, status, data)
		}
		if status != 0 && status < 500 {
			return status, data
		}
		l.stats.retries.Add(1)
		select {
		case <-ctx.Done():
			return 0, data
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// burst is how many workloads arrive at once now and then, as in Kueue's
// performance test (which submits everything at once): the steady rate
// alone seldom fills a cohort, and preemption needs a full one.
const burst = 60

// submitLoop submits at the rate, and a burst every 8-15 s, until ctx
// ends; each submission goes on in its own goroutine until answered or
// drain ends.
func (l *load) submitLoop(ctx, drain context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.rate))
	defer tick.Stop()
	nextBurst := time.After(l.burstGap())
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.send(drain)
		case <-nextBurst:
			for range burst {
				l.send(drain)
			}
			nextBurst = time.After(l.burstGap())
		}
	}
}

func (l *load) burstGap() time.Duration {
	return time.Duration(8000+l.intN(7000)) * time.Millisecond
}

// send submits the next workload: its size and queue drawn from the seed.
func (l *load) send(drain context.Context) {
	k := Key{Namespace, fmt.Sprintf("w-%05d", l.next.Add(1))}
	l.mu.Lock()
	s := pickSize(l.rng)
	lq := l.cqs[l.rng.IntN(len(l.cqs))]
	l.sent[k] = Unanswered
	l.mu.Unlock()
	l.submissions.Add(1)
	go l.submit(drain, k, workloadJSON(k.Name, lq, s))
}

func (l *load) submit(ctx context.Context, k Key, body []byte) {
	defer l.submissions.Done()
	key := fmt.Sprintf("chaos-%d-%s", l.seed, k.Name)
	status, data := l.retry(ctx, "POST", "/v1/workloads", body, map[string]string{"Idempotency-Key": key})
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case status >= 200 && status < 300:
		l.sent[k] = Accepted
		l.live = append(l.live, k)
	case status != 0:
		l.sent[k] = Refused
		l.refusals = append(l.refusals, fmt.Sprintf("%s: %d %s", k, status, data))
	}
}

// watch follows the log's workload events and finishes each admitted
// workload 0-500 ms after seeing its admission. It recreates its
// consumer after errors (NATS restarts), from the last sequence seen.
func (l *load) watch(ctx, finishCtx context.Context, js jetstream.JetStream) {
	var last uint64
	for ctx.Err() == nil {
		err := l.follow(ctx, finishCtx, js, &last)
		if ctx.Err() == nil && err != nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (l *load) follow(ctx, finishCtx context.Context, js jetstream.JetStream, last *uint64) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := js.Stream(cctx, events.Stream)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectRoot + ".wl.>"}}
	if *last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *last+1
	}
	cons, err := stream.OrderedConsumer(cctx, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		if meta, err := msg.Metadata(); err == nil {
			*last = meta.Sequence.Stream
		}
		if msg.Headers().Get(events.HeaderType) != string(events.QuotaReserved) {
			continue
		}
		ev, err := events.Parse(msg.Headers().Get, msg.Data())
		if err != nil {
			continue // the checker reports undecodable events
		}
		ref := ev.Data.(*events.QuotaReservedData).WorkloadRef
		l.finishes.Add(1)
		go l.finishLater(finishCtx, Key(ref), time.Duration(l.intN(500))*time.Millisecond)
	}
}

func (l *load) finishLater(ctx context.Context, k Key, after time.Duration) {
	defer l.finishes.Done()
	select {
	case <-ctx.Done():
		return
	case <-time.After(after):
	}
	status, _ := l.retry(ctx, "POST", "/v1/workloads/"+k.Namespace+"/"+k.Name+"/finish", []byte(`{"succeeded":true}`), nil)
	if status == http.StatusAccepted {
		l.stats.finishes.Add(1)
	}
}

// priorityLoop changes a random submitted workload's priority every
// second or so, which can make it preempt or become a victim.
func (l *load) priorityLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(500+l.intN(1000)) * time.Millisecond):
		}
		l.mu.Lock()
		if len(l.live) == 0 {
			l.mu.Unlock()
			continue
		}
		k := l.live[l.rng.IntN(len(l.live))]
		prio := sizes[l.rng.IntN(len(sizes))].priority + int32(l.rng.IntN(3)) - 1
		l.mu.Unlock()
		body, _ := json.Marshal(map[string]int32{"priority": prio})
		status, _ := l.retry(ctx, "POST", "/v1/workloads/"+k.Namespace+"/"+k.Name+"/priority", body, nil)
		if status == http.StatusAccepted {
			l.stats.priorities.Add(1)
		}
	}
}

// outcomes is what became of every submission.
func (l *load) outcomes() map[Key]Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Key]Outcome, len(l.sent))
	for k, o := range l.sent {
		out[k] = o
	}
	return out
}

// applySetup applies the capacity until ingest takes it.
func (l *load) applySetup(ctx context.Context, yaml string) error {
	status, data := l.retry(ctx, "POST", "/v1/apply", []byte(yaml), map[string]string{"Content-Type": "application/yaml"})
	if status != http.StatusOK {
		return fmt.Errorf("apply: %d %s", status, data)
	}
	return nil
}

// sync waits until every service and the projection have processed the
// whole stream twice at the same last sequence, so nothing is still on
// its way; 503 and 504 (and no answer) are asked again.
func (l *load) sync(ctx context.Context) (uint64, error) {
	var prev uint64
	for {
		status, data := l.retry(ctx, "GET", "/v1/sync?timeout=20s", nil, nil)
		if status == 0 {
			return 0, fmt.Errorf("sync: no answer before the deadline: %s", data)
		}
		if status != http.StatusOK {
			return 0, fmt.Errorf("sync: %d %s", status, data)
		}
		var out struct{ Seq uint64 }
		if err := json.Unmarshal(data, &out); err != nil {
			return 0, fmt.Errorf("sync: %w: %s", err, data)
		}
		if out.Seq == prev {
			return out.Seq, nil
		}
		prev = out.Seq
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// projection lists every workload of the namespace, page by page.
func (l *load) projection(ctx context.Context) (map[Key]string, error) {
	out := map[Key]string{}
	after := ""
	for {
		path := "/v1/workloads?namespace=" + Namespace + "&limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		status, data := l.retry(ctx, "GET", path, nil, nil)
		if status != http.StatusOK {
			return nil, fmt.Errorf("list workloads: %d %s", status, data)
		}
		var page struct {
			Items []struct{ Namespace, Name, Status string }
			Next  string
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return nil, fmt.Errorf("list workloads: %w", err)
		}
		for _, it := range page.Items {
			k := Key{it.Namespace, it.Name}
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("list workloads: %s listed twice", k)
			}
			out[k] = it.Status
		}
		if page.Next == "" || len(page.Items) == 0 {
			return out, nil
		}
		after = page.Next
	}
}
