package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/jetqueue/jetqueue/libs/sim"
)

func newSimulate(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "simulate FILE...",
		Short: "Run conformance scenarios on the admission core with a fake clock",
		Long: `simulate runs each scenario file (shared/conformance/FORMAT.md) and prints,
for each expect step and once at the end, the observed state as one JSON line.
Mismatches are printed to stderr as (-want +got) diffs.

Exit status: 0 when every check passes, 1 on any mismatch, 2 when a file is
malformed (the message names the step and field).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			code := 0
			for _, f := range files {
				code = max(code, simulateFile(f, stdout, stderr))
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}

func simulateFile(path string, stdout, stderr io.Writer) int {
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
	res, err := sim.Run(sc)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 2
	}
	enc := json.NewEncoder(stdout)
	for _, cp := range res.Checkpoints {
		if err := enc.Encode(cp); err != nil {
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
