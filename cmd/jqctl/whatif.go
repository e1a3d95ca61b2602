package main

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// whatifReport is POST /v1/whatif's answer (libs/whatif.Report).
type whatifReport struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Arrivals int       `json:"arrivals"`
	Queues   []struct {
		ClusterQueue string      `json:"clusterQueue"`
		Old          whatifStats `json:"old"`
		New          whatifStats `json:"new"`
	} `json:"clusterQueues"`
	Moved []struct {
		Namespace    string     `json:"namespace"`
		Name         string     `json:"name"`
		Hidden       bool       `json:"hidden"`
		ClusterQueue string     `json:"clusterQueue"`
		Old          *time.Time `json:"old"`
		New          *time.Time `json:"new"`
		DeltaSeconds *float64   `json:"deltaSeconds"`
	} `json:"moved"`
	Steps int `json:"steps"`
}

type whatifStats struct {
	Admitted        int     `json:"admitted"`
	Waited          int     `json:"waited"`
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
	P95WaitSeconds  float64 `json:"p95WaitSeconds"`
	Unadmitted      int     `json:"unadmitted"`
	Usage           []struct {
		Flavor   string  `json:"flavor"`
		Resource string  `json:"resource"`
		Percent  float64 `json:"percent"`
	} `json:"usage"`
	Preemptions int `json:"preemptions"`
}

func whatifCmd(stdout io.Writer) *cobra.Command {
	var file, since, from, to, output string
	var top int
	cmd := &cobra.Command{
		Use:   "whatif -f NEW-CONFIG.yaml [--since 24h | --from T --to T]",
		Short: "Replay the recorded history with a changed configuration and compare each ClusterQueue, old against new",
		Long: `Replays the recorded history (arrivals; finishes after their recorded run
times; priority changes; PodsReady after its recorded delays) through the
scheduler with the objects of NEW-CONFIG.yaml in place of those of the same
kind and name, and prints per ClusterQueue the recorded (old) and replayed
(new) admitted count, mean and 95th percentile time to admission, usage of
nominal quota and preemptions, then the workloads whose first admission
moved most. The window is required: --since (at most 31 days), or --from
and --to (RFC 3339).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"since": since, "from": from, "to": to} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if top > 0 {
				q.Set("top", fmt.Sprint(top))
			}
			var rep whatifReport
			if output != "" {
				var raw map[string]any
				if err := newClient(cmd).do("POST", "/v1/whatif?"+q.Encode(), contentType(data), data, &raw); err != nil {
					return err
				}
				return printData(stdout, raw, output)
			}
			if err := newClient(cmd).do("POST", "/v1/whatif?"+q.Encode(), contentType(data), data, &rep); err != nil {
				return err
			}
			printWhatif(stdout, rep)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the changed configuration (- for standard input)")
	cmd.Flags().StringVar(&since, "since", "", "replay the last DURATION (e.g. 24h)")
	cmd.Flags().StringVar(&from, "from", "", "start of the window (RFC 3339)")
	cmd.Flags().StringVar(&to, "to", "", "end of the window (RFC 3339)")
	cmd.Flags().IntVar(&top, "top", 0, "how many moved workloads to list (default 10)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of tables")
	cmd.MarkFlagsMutuallyExclusive("since", "from")
	cmd.MarkFlagsMutuallyExclusive("since", "to")
	cmd.MarkFlagsRequiredTogether("from", "to")
	return cmd
}

func printWhatif(w io.Writer, rep whatifReport) {
	fmt.Fprintf(w, "Replayed %s to %s: %d arrivals, %d steps.\n\n", rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339), rep.Arrivals, rep.Steps)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTERQUEUE\tADMITTED\tMEAN WAIT\tP95 WAIT\tBUSIEST CELL (USAGE)\tPREEMPTIONS\tNEVER ADMITTED")
	for _, q := range rep.Queues {
		fmt.Fprintf(tw, "%s\t%d → %d\t%s → %s\t%s → %s\t%s → %s\t%d → %d\t%d → %d\n", q.ClusterQueue,
			q.Old.Admitted, q.New.Admitted, secs(q.Old.MeanWaitSeconds), secs(q.New.MeanWaitSeconds),
			secs(q.Old.P95WaitSeconds), secs(q.New.P95WaitSeconds), usage(q.Old), usage(q.New),
			q.Old.Preemptions, q.New.Preemptions, q.Old.Unadmitted, q.New.Unadmitted)
	}
	tw.Flush()
	if len(rep.Moved) == 0 {
		fmt.Fprintln(w, "\nNo workload's first admission moved.")
		return
	}
	fmt.Fprintln(w, "\nMoved most (first admission, old → new):")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tCLUSTERQUEUE\tOLD\tNEW\tCHANGE")
	for _, m := range rep.Moved {
		name := m.Namespace + "/" + m.Name
		if m.Hidden {
			name = "(another workload)"
		}
		change := "-"
		if m.DeltaSeconds != nil {
			change = fmt.Sprintf("%+gs", *m.DeltaSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, m.ClusterQueue, stamp(m.Old), stamp(m.New), change)
	}
	tw.Flush()
}

func secs(v float64) string {
	return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
}

func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// usage renders the busiest cell's average usage of nominal quota (all
// of them with -o json).
func usage(s whatifStats) string {
	best := -1
	for i, u := range s.Usage {
		if best < 0 || u.Percent > s.Usage[best].Percent {
			best = i
		}
	}
	if best < 0 {
		return "-"
	}
	u := s.Usage[best]
	if u.Percent < 0 {
		return fmt.Sprintf("%s/%s borrowed only", u.Flavor, u.Resource)
	}
	return fmt.Sprintf("%s/%s %.1f%%", u.Flavor, u.Resource, u.Percent)
}
