package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/projector"
)

// BenchmarkRestart fills JQ_EVENTS with a log of BENCH_RESTART_EVENTS
// events (default 1,000,000) written straight into the stream with the
// real event encoding: 10 ClusterQueues, then workloads submitted,
// reserved (QuotaReserved), placed and finished, 200 running at any
// time, and at the end 100 that can never fit, pending. Then it times an
// admission process (the real binary) from its start until it has caught
// up with the stream (/readyz), without a snapshot and with one, and
// prints each time with the process's RSS after catch-up; and it times a
// projection rebuild (the projector into an empty PostgreSQL schema) over
// the same log. BENCH_RESTART_FULL_EVENTS (default: the same log) runs the
// case without a snapshot over a log of that size instead, when the full
// log takes too long (the instance that writes the snapshot replays the
// whole log without one all the same, and its figures are printed). For
// the restart with the snapshot it prints the restore's phases (load:
// check, download, gunzip; decode), the rest (start, consumer, the tail
// after the snapshot, until caught up), the process's CPU time, and
// whether it met the target of 10s. Run it with `make bench-restart`.
func BenchmarkRestart(b *testing.B) {
	size := envInt(b, "BENCH_RESTART_EVENTS", 1_000_000)
	fullSize := envInt(b, "BENCH_RESTART_FULL_EVENTS", size)
	bin := buildAdmission(b)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if fullSize != size {
			srv := testenv.NATS(b)
			js := benchJS(b, srv.ClientURL())
			fill(b, ctx, js, fullSize)
			r := catchUp(b, ctx, bin, srv.ClientURL(), js, "0")
			fmt.Printf("restart without a snapshot (log of %d events, not %d): %s to catch up, %s CPU, RSS %d MiB\n",
				fullSize, size, r.took.Round(time.Millisecond), r.cpu, r.rss>>20)
		}
		srv := testenv.NATS(b)
		js := benchJS(b, srv.ClientURL())
		start := time.Now()
		last := fill(b, ctx, js, size)
		fmt.Printf("log: %d events in JQ_EVENTS, written in %s\n", last, time.Since(start).Round(time.Millisecond))
		if fullSize == size {
			r := catchUp(b, ctx, bin, srv.ClientURL(), js, "0")
			fmt.Printf("restart without a snapshot: %s to catch up, %s CPU, RSS %d MiB\n", r.took.Round(time.Millisecond), r.cpu, r.rss>>20)
		}
		// An instance that writes a snapshot as soon as it has caught up
		// (without one to start from: a full replay too).
		w := catchUp(b, ctx, bin, srv.ClientURL(), js, "1")
		obs, err := js.ObjectStore(ctx, snapshot.Bucket)
		if err != nil {
			b.Fatal(err)
		}
		info, err := obs.GetInfo(ctx, "admission-0")
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("snapshot: %s/admission-0 at Jq-Seq %s, %.1f MiB compressed (written by an instance that replayed the log without one in %s, %s CPU)\n",
			snapshot.Bucket, info.Metadata[snapshot.MetaSeq], float64(info.Size)/(1<<20), w.took.Round(time.Millisecond), w.cpu)
		// The stream as the restart finds it: the instances before
		// published decisions after the log written above.
		stream, err := js.Stream(ctx, events.Stream)
		if err != nil {
			b.Fatal(err)
		}
		last = stream.CachedInfo().State.LastSeq
		snapSeq, _ := strconv.ParseUint(info.Metadata[snapshot.MetaSeq], 10, 64)
		r := catchUp(b, ctx, bin, srv.ClientURL(), js, "0")
		verdict := "met"
		if r.took >= 10*time.Second {
			verdict = "NOT met"
		}
		fmt.Printf("restart with the snapshot: %s to catch up over %d events (target under 10s: %s)\n", r.took.Round(time.Millisecond), last, verdict)
		fmt.Printf("  restore: load (check, download, gunzip) %s, decode %s; the rest (start, consumer, tail of %d events, catch-up seen) %s\n",
			r.load.Round(time.Millisecond), r.decode.Round(time.Millisecond), last-snapSeq, (r.took - r.load - r.decode).Round(time.Millisecond))
		fmt.Printf("  CPU time (user+sys) %s, RSS after catch-up %d MiB, load average %s\n", r.cpu, r.rss>>20, r.loadavg)
		d, n := rebuild(b, ctx, js)
		fmt.Printf("projection rebuild: %d events in %s (%.0f events/s)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		b.Fatalf("%s=%q: want a number of events, at least 1000", name, v)
	}
	return n
}

func buildAdmission(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "admission")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/jetqueue/jetqueue/services/admission")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("build admission: %v", err)
	}
	return bin
}

func benchJS(b *testing.B, url string) jetstream.JetStream {
	nc, err := bus.Connect(url, "bench-restart")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bus.EnsureStream(context.Background(), js, bus.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	return js
}

// fill writes a log of about n events and returns the stream's last
// sequence.
func fill(b *testing.B, ctx context.Context, js jetstream.JetStream, n int) uint64 {
	const queues, running, pending = 10, 200, 100
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	count := 0
	at := func() time.Time { return t0.Add(time.Duration(count) * time.Millisecond) }
	pub := func(typ events.Type, subject string, data any) {
		count++
		ev := events.Event{ID: fmt.Sprintf("bench-%d", count), Type: typ, Source: "bench", Time: at(), Subject: subject, Data: data}.FromOwner()
		if _, err := bus.PublishAsync(js, ev, nil); err != nil {
			b.Fatal(err)
		}
		if count%4096 == 0 {
			// A window of acknowledgements, under the client's bound.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
	}
	config := func(kind, ns, name, object string) {
		pub(events.ConfigApplied, events.ConfigSubject(kind, ns, name), &events.ConfigAppliedData{
			ConfigRef: events.ConfigRef{Kind: kind, Namespace: ns, Name: name}, Object: json.RawMessage(object)})
	}
	config("ResourceFlavor", "", "rf", `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`)
	for q := range queues {
		config("ClusterQueue", "", fmt.Sprint("cq-", q), fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq-%d"},
			"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"rf","resources":[{"name":"cpu","nominalQuota":"100"},{"name":"memory","nominalQuota":"400Gi"}]}]}]}}`, q))
		config("LocalQueue", fmt.Sprint("ns-", q), "lq", fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns-%d"},"spec":{"clusterQueue":"cq-%d"}}`, q, q))
	}
	submit := func(i int, cpu string) events.WorkloadRef {
		ns, name := fmt.Sprint("ns-", i%queues), fmt.Sprint("w-", i)
		wl := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":%q,"namespace":%q,"uid":"uid-%d"},
			"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":%q,"memory":"1Gi"}}}]}}}]}}`, name, ns, i, cpu)
		ref := events.WorkloadRef{Namespace: ns, Name: name}
		pub(events.WorkloadSubmitted, events.WorkloadSubject(ns, name), &events.WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(wl), CreatedAt: at()})
		return ref
	}
	refs := map[int]events.WorkloadRef{}
	for i := 0; count < n-pending; i++ {
		ref := submit(i, "1")
		refs[i] = ref
		pub(events.QuotaReserved, events.WorkloadSubject(ref.Namespace, ref.Name), &events.QuotaReservedData{WorkloadRef: ref,
			Admission: scheduler.Admission{ClusterQueue: fmt.Sprint("cq-", i%queues), PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 1,
				Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "rf", corev1.ResourceMemory: "rf"},
				Usage:   map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30}}}}})
		pub(events.Placed, events.PlacedSubject(ref.Namespace, ref.Name), &events.PlacedData{WorkloadRef: ref,
			PodSets: []events.PodSetPlacement{{Name: "main", Nodes: []events.NodeScore{{Node: fmt.Sprint("node-", i%50), FitPlus: 80, Scarce: 100, Total: 360}}}}})
		if old, ok := refs[i-running]; ok {
			pub(events.WorkloadFinished, events.WorkloadSubject(old.Namespace, old.Name), &events.WorkloadFinishedData{WorkloadRef: old, Succeeded: true})
			delete(refs, i-running)
		}
	}
	for i := range pending {
		submit(10_000_000+i, "1000")
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
	s, err := js.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if info.State.Msgs != uint64(count) {
		b.Fatalf("stream holds %d events, %d published", info.State.Msgs, count)
	}
	return info.State.LastSeq
}

// caught is what catchUp measured of one admission process.
type caught struct {
	// took is from the process's start until it was ready (caught up).
	took time.Duration
	// cpu is its user and system CPU time then: on a shared machine, what
	// the catch-up cost apart from waiting for a CPU.
	cpu     time.Duration
	rss     int64
	loadavg string
	// load and decode are its restore's phases (jetqueue_snapshot_restore_seconds).
	load, decode time.Duration
}

// catchUp starts the admission binary (--snapshot-events snapEvents) and
// measures how long it took to be ready, that is caught up with the
// stream, and what it used; then it stops the process and, when it was to
// snapshot, waits for its snapshot to reach the stream's end first.
func catchUp(b *testing.B, ctx context.Context, bin, url string, js jetstream.JetStream, snapEvents string) caught {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, bin, "--nats-url", url, "--admin-addr", addr, "--instance", "bench", "--log-level", "warn",
		"--snapshot-events", snapEvents, "--snapshot-interval", "0")
	cmd.Stderr = os.Stderr
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	last := stream.CachedInfo().State.LastSeq
	// The progress a previous instance reported is not this one's.
	if kv, err := js.KeyValue(ctx, bus.ProgressBucket); err == nil {
		if err := kv.Delete(ctx, bus.ProgressName("admission", 0)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			b.Fatal(err)
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// Ready, and its progress (JQ_PROGRESS, reported once caught up) at
	// the stream's end as the process started: readiness alone can come
	// early, when a fetch finds nothing within its wait on a busy machine.
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if seq, err := bus.ReadProgress(ctx, js, bus.ProgressName("admission", 0)); err == nil && seq >= last {
					break
				}
			}
		}
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := caught{took: time.Since(start)}
	r.rss, r.cpu, r.loadavg = rssOf(b, cmd.Process.Pid), cpuOf(b, cmd.Process.Pid), loadavg()
	r.load, r.decode = restorePhases(b, addr)
	if snapEvents != "0" {
		for {
			s, _ := js.Stream(ctx, events.Stream)
			last := s.CachedInfo().State.LastSeq
			if obs, err := js.ObjectStore(ctx, snapshot.Bucket); err == nil {
				if info, err := obs.GetInfo(ctx, "admission-0"); err == nil {
					if seq, _ := strconv.ParseUint(info.Metadata[snapshot.MetaSeq], 10, 64); seq >= last {
						break
					}
				}
			}
			if ctx.Err() != nil {
				b.Fatal(ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return r
}

// restorePhases reads jetqueue_snapshot_restore_seconds off the admin
// server (zero without a restore).
func restorePhases(b *testing.B, addr string) (load, decode time.Duration) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "jetqueue_snapshot_restore_seconds{") {
			continue
		}
		f := strings.Fields(line)
		secs, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("%q: %v", line, err)
		}
		d := time.Duration(secs * float64(time.Second))
		switch {
		case strings.Contains(line, `phase="load"`):
			load = d
		case strings.Contains(line, `phase="decode"`):
			decode = d
		}
	}
	return load, decode
}

// cpuOf reads a process's user and system CPU time so far: on a shared
// machine, what the catch-up cost apart from waiting for a CPU.
func cpuOf(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which ends at the last ')'): state
	// is the 3rd field, utime and stime the 14th and 15th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// rssOf reads a process's resident set size in bytes.
func rssOf(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// rebuild projects the whole log into an empty PostgreSQL schema, as
// `jqctl projection rebuild` makes the projector do, and returns how long
// it took and how many events.
func rebuild(b *testing.B, ctx context.Context, js jetstream.JetStream) (time.Duration, uint64) {
	st, err := store.Open(ctx, testenv.Postgres(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	last := stream.CachedInfo().State.LastSeq
	kv, ttl, err := bus.EnsureLeaseBucket(ctx, js, bus.DefaultLeaseTTL)
	if err != nil {
		b.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- projector.Run(pctx, projector.Config{JS: js, Stream: stream, Store: st,
			Leader: bus.NewLeadership(kv, projector.LeaseKey, "bench", ttl)})
	}()
	for {
		seq, err := st.LastSeq(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if seq >= last {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took, last
}
