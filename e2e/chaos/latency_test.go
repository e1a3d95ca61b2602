package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/e2e/internal/steady"
)

// BenchmarkSteadyLatencyProcesses is BenchmarkSteadyLatency (package
// e2e) against the services as a deployment runs them: nats-server,
// PostgreSQL and one instance of each service, each its own process
// built from this repository, started afresh for every run. In one
// process every service shares one heap, and each collection slows them
// all; here each has its own. make bench-latency runs both.
//
// JQ_LATENCY_PROFILE=DIR also writes a CPU profile of each service
// process over the steady load, DIR/<process>.pprof, taken through the
// services' --pprof-addr.
func BenchmarkSteadyLatencyProcesses(b *testing.B) {
	logDir := b.TempDir()
	bin := b.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := Build(ctx, filepath.Dir(wd), bin); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, o := range steady.FromEnv() {
			res := processRun(b, bin, logDir, o)
			res.Print(" (processes)", o)
			b.ReportMetric(float64(res.Quantile(99).Microseconds())/1000, fmt.Sprintf("%s-%d-p99-ms", o.Via, o.Rate))
		}
	}
}

// processRun runs one steady load against a fresh cluster of one
// instance per service.
func processRun(b *testing.B, bin, logDir string, o steady.Options) steady.Result {
	profiles := os.Getenv("JQ_LATENCY_PROFILE")
	c, err := startClusterOf(bin, logDir, natsStore(b), map[string]int{"ingest": 1, "admission": 1, "preemptor": 1, "podsready": 1, "scorer": 1}, profiles != "")
	defer c.close()
	if err != nil {
		b.Fatal(err)
	}
	base := c.ingestURLs[0]
	if err := waitReady(base, time.Minute); err != nil {
		b.Fatal(err)
	}
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/apply", steady.Queues(o.Queues, "1000000")},
		{"GET", "/v1/sync?timeout=60s", ""},
	} {
		if err := call(req.method, base+req.path, req.body); err != nil {
			b.Fatal(err)
		}
	}
	o.Base, o.NATSURL = base, c.nats.URL()
	before := treeCPU()
	profiled := c.profile(profiles, o.Duration)
	res, err := steady.Run(context.Background(), o)
	if perr := profiled(); perr != nil {
		b.Error(perr)
	}
	if err != nil {
		b.Fatalf("%s at %d/s: %v", o.Via, o.Rate, err)
	}
	after := treeCPU()
	// What each process (PostgreSQL with its backends) spent per
	// workload over the run, for where the time goes.
	var parts []string
	var total time.Duration
	for _, p := range c.all() {
		pid := p.pid()
		d := (after[pid] + after[-pid] - before[pid] - before[-pid]) / time.Duration(max(len(res.Latencies), 1))
		total += d
		parts = append(parts, fmt.Sprintf("%s %v", p.name, d.Round(time.Microsecond)))
	}
	fmt.Printf("  CPU per admitted workload: %v (%s)\n", total.Round(time.Microsecond), strings.Join(parts, ", "))
	return res
}

// treeCPU reads the CPU time (user+sys) of each live process the suite
// started and of its children (PostgreSQL's backends are the
// postmaster's), by the started process's id.
func treeCPU() map[int]time.Duration {
	out := map[int]time.Duration{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range dirs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp session tty tpgid flags minflt
		// cminflt majflt cmajflt utime stime ...", times in clock ticks
		// (USER_HZ, 100 on Linux).
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(string(data[:i]))[0])
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		t := time.Duration(utime+stime) * 10 * time.Millisecond
		out[pid] += t
		out[-ppid] += t // a child's, summed under its parent's id negated
	}
	return out
}

// call makes one request and wants 200.
func call(method, url, body string) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return nil
}

// waitReady waits until ingest answers its API.
func waitReady(base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(base + "/v1/sync?timeout=1s")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ingest at %s did not answer within %v: %v", base, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
