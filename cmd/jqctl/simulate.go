package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/sim"
)

// simulateGCPercent is the collector's GOGC for simulate (see its help).
const simulateGCPercent = 400

func newSimulate(stdout, stderr io.Writer) *cobra.Command {
	var cpuProfile string
	var timing bool
	var shards int
	cmd := &cobra.Command{
		Use:   "simulate FILE...",
		Short: "Run conformance scenarios on the admission core with a fake clock",
		Long: `simulate runs each scenario file (shared/conformance/FORMAT.md) and prints,
for each expect step and once at the end, the observed state as one JSON line.
Mismatches are printed to stderr as (-want +got) diffs.

--shards N runs the scenario as N admission shards in lockstep would decide
it (each deciding the cohort trees FNV-1a of the cohort's name mod N gives
it, its decisions reaching the others as facts); the output must equal the
unsharded run's. Under waitForPodsReady.blockAdmission sharded admission
decides nothing.

--timing prints, per file on stderr, the CPU time (user+sys) spent parsing
the file and running it, so that a benchmark can tell the decision core's
share from the decoder's. --cpuprofile writes a pprof CPU profile of the
whole command.

Unless GOGC is set, simulate runs Go's collector at GOGC=400: a run's heap
grows from nothing to its peak and little of it is garbage before the end,
so collecting at every doubling marks the same objects again and again
(on the 20,000-workload scenario of make bench-vs-kueue the default costs
about a fifth more CPU; the peak heap is about 10% higher).

Exit status: 0 when every check passes, 1 on any mismatch, 2 when a file is
malformed (the message names the step and field).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if _, set := os.LookupEnv("GOGC"); !set {
				debug.SetGCPercent(simulateGCPercent)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			code := 0
			for _, f := range files {
				code = max(code, simulateFile(f, stdout, stderr, timing, shards))
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	cmd.Flags().IntVar(&shards, "shards", 1, "decide as this many admission shards in lockstep (1 to 64)")
	cmd.Flags().BoolVar(&timing, "timing", false, "print the parse and run CPU time of each file on stderr")
	return cmd
}

// cpuTime is the process's CPU time so far (user+sys): on a shared machine
// wall time measures the neighbours as much as the work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func simulateFile(path string, stdout, stderr io.Writer, timing bool, shards int) int {
	start := cpuTime()
	if shards < 1 || shards > bus.MaxShards {
		fmt.Fprintf(stderr, "--shards %d: want 1 to %d\n", shards, bus.MaxShards)
		return 2
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	}
	sc, err := sim.Parse(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	}
	parsed := cpuTime()
	res, err := sim.RunSharded(sc, shards)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	}
	ran := cpuTime()
	if timing {
		// The run includes validating each submitted object (the door's
		// part) as well as deciding.
		fmt.Fprintf(stderr, "%s: timing: parse %.3fs run %.3fs cpu\n", path, (parsed - start).Seconds(), (ran - parsed).Seconds())
	}
	var line []byte
	for i := range res.Checkpoints {
		line = res.Checkpoints[i].AppendJSON(line[:0])
		if _, err := stdout.Write(line); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			return 2
		}
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
	}
	for _, m := range res.Mismatches {
		fmt.Fprintf(stderr, "%s: %s\n", path, m)
	}
	if len(res.Mismatches) > 0 {
		return 1
	}
	return 0
}
