package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/url"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// The load generator: Kueue's scheduler-performance baseline
// (kubernetes-sigs/kueue test/performance/scheduler/configs/baseline,
// generator.yaml and rangespec.yaml) in real time against a running
// jetqueue, and simpler burst and steady-rate profiles.
//
// As Kueue's runner does: every ClusterQueue has its own namespace and
// LocalQueue; each workload set of each queue creates its workloads one
// after another, waiting its interval before each; a workload is finished
// its run time after it is admitted (an evicted one is finished only after
// its next admission). Time to admission is the server's admittedAt minus
// its createdAt, of the latest admission (Kueue's recorder: admission time
// minus creation time, rewritten at each admission); ClusterQueue usage is
// the CPU held, from each admission to the finish (or eviction) jqctl saw,
// over the nominal quota times the wall time, in percent (Kueue's checker).

// loadClass is one workload set: count workloads of one class, created
// interval apart.
type loadClass struct {
	Name     string
	Count    int
	Interval time.Duration
	Runtime  time.Duration
	Priority int32
	CPU      int
}

// loadProfile is the queues and workload sets of one run.
type loadProfile struct {
	Cohorts, QueuesPerCohort int
	NominalCPU, BorrowCPU    int
	Classes                  []loadClass
	// Kueue's published figures, printed beside ours (baseline only).
	KueueWall    time.Duration
	KueueUsage   float64
	KueueAdmitMs map[string]float64
}

// kueueBaseline is Kueue's baseline generator.yaml; the figures are
// rangespec.yaml's averages of five runs.
func kueueBaseline() loadProfile {
	return loadProfile{
		Cohorts: 5, QueuesPerCohort: 6, NominalCPU: 20, BorrowCPU: 100,
		Classes: []loadClass{
			{Name: "small", Count: 350, Interval: 100 * time.Millisecond, Runtime: 200 * time.Millisecond, Priority: 50, CPU: 1},
			{Name: "medium", Count: 100, Interval: 500 * time.Millisecond, Runtime: 500 * time.Millisecond, Priority: 100, CPU: 5},
			{Name: "large", Count: 50, Interval: 1200 * time.Millisecond, Runtime: time.Second, Priority: 200, CPU: 20},
		},
		KueueWall: 351116 * time.Millisecond, KueueUsage: 55.9,
		KueueAdmitMs: map[string]float64{"large": 16501, "medium": 76768, "small": 215468},
	}
}

func newLoadtest(stdout io.Writer) *cobra.Command {
	var profile string
	var scale, rate float64
	var count int
	var duration, runtime, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "loadtest --profile kueue-baseline|burst|steady",
		Short: "Run a load profile against a jetqueue server in real time and report admission times and usage",
		Long: `loadtest creates its own ResourceFlavor, ClusterQueues, namespaces and
LocalQueues (named lt-<run id>-...), submits workloads over HTTP as the
profile says, finishes each its run time after admission, and reports.

Profiles:
  kueue-baseline  Kueue's scheduler-performance baseline: 5 cohorts x 6
                  ClusterQueues (cpu nominal 20, borrowingLimit 100,
                  reclaimWithinCohort Any, withinClusterQueue LowerPriority);
                  per queue 350 small (every 100ms, 200ms, priority 50, 1 cpu),
                  100 medium (500ms, 500ms, 100, 5 cpu), 50 large (1.2s, 1s,
                  200, 20 cpu). --scale multiplies every count.
  burst           --count workloads (1 cpu, --runtime) submitted at once over
                  the baseline's queues.
  steady          --rate workloads a second for --duration over the same queues.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p loadProfile
			switch profile {
			case "kueue-baseline":
				if scale <= 0 || scale > 10 {
					return fmt.Errorf("--scale must be in (0, 10]")
				}
				p = kueueBaseline()
				for i := range p.Classes {
					p.Classes[i].Count = max(1, int(math.Round(float64(p.Classes[i].Count)*scale)))
				}
			case "burst", "steady":
				p = kueueBaseline()
				queues := p.Cohorts * p.QueuesPerCohort
				c := loadClass{Name: profile, Runtime: runtime, Priority: 0, CPU: 1}
				if profile == "burst" {
					if count < 1 || count > 1_000_000 {
						return fmt.Errorf("--count must be in [1, 1000000]")
					}
					c.Count = (count + queues - 1) / queues
				} else {
					if rate <= 0 || rate > 100_000 || duration <= 0 || duration > 24*time.Hour {
						return fmt.Errorf("--rate must be in (0, 100000] and --duration in (0, 24h]")
					}
					c.Count = max(1, int(rate*duration.Seconds())/queues)
					c.Interval = time.Duration(float64(time.Second) * float64(queues) / rate)
				}
				p.Classes = []loadClass{c}
				p.KueueAdmitMs = nil
				p.KueueWall = 0
			default:
				return fmt.Errorf("unknown --profile %q: kueue-baseline, burst or steady", profile)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return runLoad(ctx, newClient(cmd), p, stdout)
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "kueue-baseline", "kueue-baseline, burst or steady")
	cmd.Flags().Float64Var(&scale, "scale", 1, "kueue-baseline: multiply every workload count by this")
	cmd.Flags().IntVar(&count, "count", 3000, "burst: workloads submitted at once")
	cmd.Flags().Float64Var(&rate, "rate", 200, "steady: workloads submitted a second")
	cmd.Flags().DurationVar(&duration, "duration", time.Minute, "steady: how long to submit")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up (exit 1) after this long; 0: never")
	cmd.Flags().DurationVar(&runtime, "runtime", 500*time.Millisecond, "burst and steady: each workload's run time once admitted")
	return cmd
}

// loadWorkload is what the run knows of one workload it submitted.
type loadWorkload struct {
	class      *loadClass
	cq         int
	createdAt  time.Time
	admittedAt time.Time // the latest admission seen
	// admitWait is creation to the latest admission, as Kueue's recorder
	// keeps it.
	admitWait time.Duration
	admitted  bool
	finishing bool
	finished  bool
}

type loadRun struct {
	c      *client
	p      loadProfile
	prefix string
	out    io.Writer

	mu        sync.Mutex
	wls       map[string]*loadWorkload // namespace/name
	submitted atomic.Int64
	failed    atomic.Int64
	finished  atomic.Int64
	total     int
	usage     float64 // cpu·seconds of quota held, from admission to finish or eviction
}

func (r *loadRun) cqName(cohort, i int) string {
	return fmt.Sprintf("%s-cq-%d-%d", r.prefix, cohort, i)
}

func runLoad(ctx context.Context, c *client, p loadProfile, out io.Writer) error {
	r := &loadRun{c: c, p: p, out: out, prefix: fmt.Sprintf("lt-%d", time.Now().Unix()%1_000_000),
		wls: map[string]*loadWorkload{}}
	queues := p.Cohorts * p.QueuesPerCohort
	for i := range p.Classes {
		r.total += p.Classes[i].Count * queues
	}
	if err := r.setup(); err != nil {
		return err
	}
	fmt.Fprintf(out, "loadtest %s: %d ClusterQueues in %d cohorts, %d workloads\n", r.prefix, queues, p.Cohorts, r.total)
	start := time.Now()
	var gen sync.WaitGroup
	for q := 0; q < queues; q++ {
		for ci := range p.Classes {
			gen.Go(func() { r.generate(ctx, q, &p.Classes[ci]) })
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastProgress := start
	for {
		select {
		case <-ctx.Done():
			gen.Wait()
			return fmt.Errorf("stopped after %v: %d of %d workloads finished", time.Since(start).Round(time.Second), r.finished.Load(), r.total)
		case <-tick.C:
		}
		if err := r.poll(ctx); err != nil {
			fmt.Fprintf(out, "poll: %v\n", err)
		}
		if time.Since(lastProgress) >= 5*time.Second {
			lastProgress = time.Now()
			r.progress(start)
		}
		if int(r.finished.Load())+int(r.failed.Load()) >= r.total {
			break
		}
	}
	gen.Wait()
	wall := time.Since(start)
	r.report(wall)
	return nil
}

// setup applies the flavor, queues and LocalQueues as one request.
func (r *loadRun) setup() error {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: %s-flavor}\n", r.prefix)
	for co := 0; co < r.p.Cohorts; co++ {
		for i := 0; i < r.p.QueuesPerCohort; i++ {
			name := r.cqName(co, i)
			fmt.Fprintf(&b, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: %s}
spec:
  cohort: %s-cohort-%d
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %s-flavor
      resources: [{name: cpu, nominalQuota: %d, borrowingLimit: %d}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: %s}
spec: {clusterQueue: %s}
`, name, r.prefix, co, r.prefix, r.p.NominalCPU, r.p.BorrowCPU, name, name)
		}
	}
	return r.c.do("POST", "/v1/apply", "application/yaml", []byte(b.String()), nil)
}

// generate creates one queue's workloads of one class, one after another.
func (r *loadRun) generate(ctx context.Context, q int, c *loadClass) {
	ns := r.cqName(q/r.p.QueuesPerCohort, q%r.p.QueuesPerCohort)
	for i := 0; i < c.Count; i++ {
		if c.Interval > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.Interval):
			}
		} else if ctx.Err() != nil {
			return
		}
		name := fmt.Sprintf("%s-%d", c.Name, i)
		key := ns + "/" + name
		r.mu.Lock()
		r.wls[key] = &loadWorkload{class: c, cq: q}
		r.mu.Unlock()
		body := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q},"spec":{"queueName":"lq","priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`,
			name, ns, c.Priority, c.CPU)
		// A refused or unanswered submission is sent again (retry.go),
		// as any client should, until the run ends: failed counts only
		// what stayed refused.
		if err := r.c.doCtx(ctx, "POST", "/v1/workloads", "application/json", []byte(body), nil); err != nil {
			r.failed.Add(1)
			r.mu.Lock()
			r.wls[key].finished = true
			r.mu.Unlock()
			fmt.Fprintf(r.out, "submit %s: %v\n", key, err)
			continue
		}
		r.submitted.Add(1)
	}
}

type loadView struct {
	Namespace    string     `json:"namespace"`
	Name         string     `json:"name"`
	ClusterQueue string     `json:"clusterQueue"`
	Status       string     `json:"status"`
	CreatedAt    time.Time  `json:"createdAt"`
	AdmittedAt   *time.Time `json:"admittedAt"`
}

// poll reads the admitted workloads, schedules finishes, and integrates
// the CPU in use.
func (r *loadRun) poll(ctx context.Context) error {
	admitted := map[string]loadView{}
	after := ""
	for pages := 0; pages < 100; pages++ {
		var page struct {
			Items []loadView `json:"items"`
			Next  string     `json:"next"`
		}
		path := "/v1/workloads?status=admitted&limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := r.c.doCtx(ctx, "GET", path, "", nil, &page); err != nil {
			return err
		}
		for _, v := range page.Items {
			if strings.HasPrefix(v.Namespace, r.prefix+"-") {
				admitted[v.Namespace+"/"+v.Name] = v
			}
		}
		if page.Next == "" || len(page.Items) == 0 {
			break
		}
		after = page.Next
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, w := range r.wls {
		v, ok := admitted[key]
		if w.finished {
			continue
		}
		if !ok || v.AdmittedAt == nil {
			if w.admitted && !w.finishing {
				r.held(w, w.admittedAt, now) // evicted since
			}
			w.admitted = false
			continue
		}
		if w.admitted && w.admittedAt.Equal(*v.AdmittedAt) {
			continue
		}
		if w.admitted {
			r.held(w, w.admittedAt, *v.AdmittedAt) // evicted and admitted again
		}
		w.admitted, w.admittedAt, w.createdAt = true, *v.AdmittedAt, v.CreatedAt
		w.admitWait = max(v.AdmittedAt.Sub(v.CreatedAt), time.Nanosecond)
		at := w.admittedAt
		time.AfterFunc(max(time.Until(at.Add(w.class.Runtime)), 0), func() { r.finish(ctx, key, at) })
	}
	return nil
}

// held adds to the usage a workload's quota held from one instant to
// another (the server's admission time to the finish or eviction jqctl
// saw: the two clocks are taken to agree, as on one machine).
func (r *loadRun) held(w *loadWorkload, from, to time.Time) {
	if d := to.Sub(from); d > 0 {
		r.usage += float64(w.class.CPU) * d.Seconds()
	}
}

// finish finishes a workload still admitted since at.
func (r *loadRun) finish(ctx context.Context, key string, at time.Time) {
	r.mu.Lock()
	w := r.wls[key]
	if w.finished || w.finishing || !w.admitted || !w.admittedAt.Equal(at) {
		r.mu.Unlock()
		return
	}
	w.finishing = true
	r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	ns, name, _ := strings.Cut(key, "/")
	err := r.c.doCtx(ctx, "POST", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/finish", "application/json", []byte(`{"succeeded":true}`), nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	w.finishing = false
	r.held(w, at, time.Now())
	if err != nil {
		// Evicted meanwhile, say: the next admission finishes it.
		w.admitted = false
		return
	}
	w.finished = true
	r.finished.Add(1)
}

func (r *loadRun) progress(start time.Time) {
	r.mu.Lock()
	admitted := 0
	for _, w := range r.wls {
		if w.admitted && !w.finished {
			admitted++
		}
	}
	r.mu.Unlock()
	fin := int(r.finished.Load())
	fmt.Fprintf(r.out, "%6.0fs  submitted %d/%d  running %d  finished %d  pending %d\n", time.Since(start).Seconds(),
		r.submitted.Load(), r.total, admitted, fin, int(r.submitted.Load())-fin-admitted)
}

func (r *loadRun) report(wall time.Duration) {
	queues := r.p.Cohorts * r.p.QueuesPerCohort
	usage := 100 * r.usage / (float64(queues*r.p.NominalCPU) * wall.Seconds())
	sum := map[string]time.Duration{}
	n := map[string]int{}
	r.mu.Lock()
	for _, w := range r.wls {
		if w.admitWait > 0 {
			sum[w.class.Name] += w.admitWait
			n[w.class.Name]++
		}
	}
	r.mu.Unlock()
	fmt.Fprintf(r.out, "\n%-34s %14s %14s\n", "", "jetqueue", "Kueue baseline")
	kueue := func(s string) string {
		if r.p.KueueAdmitMs == nil {
			return "-"
		}
		return s
	}
	fmt.Fprintf(r.out, "%-34s %14s %14s\n", "wall time", wall.Round(100*time.Millisecond), kueue(r.p.KueueWall.Round(100*time.Millisecond).String()))
	fmt.Fprintf(r.out, "%-34s %13.1f%% %14s\n", "ClusterQueue usage", usage, kueue(fmt.Sprintf("%.1f%%", r.p.KueueUsage)))
	classes := make([]string, 0, len(n))
	for c := range n {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return r.p.KueueAdmitMs[classes[i]] < r.p.KueueAdmitMs[classes[j]] })
	for _, c := range classes {
		mean := sum[c] / time.Duration(n[c])
		fmt.Fprintf(r.out, "%-34s %14s %14s\n", fmt.Sprintf("mean time to admission, %s (%d)", c, n[c]),
			mean.Round(time.Millisecond), kueue(fmt.Sprintf("%.1fs", r.p.KueueAdmitMs[c]/1000)))
	}
	if f := r.failed.Load(); f > 0 {
		fmt.Fprintf(r.out, "%d submissions failed\n", f)
	}
	if r.p.KueueAdmitMs != nil && r.total != 15000 {
		fmt.Fprintf(r.out, "(Kueue's figures are for the full baseline, 15,000 workloads; this run had %d.)\n", r.total)
	}
}
