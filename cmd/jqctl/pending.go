package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// withPendingWorkloads adds `get pendingworkloads` to the get command:
// Kueue's visibility API, a queue's pending workloads with their
// positions.
func withPendingWorkloads(get *cobra.Command, stdout io.Writer) *cobra.Command {
	get.AddCommand(pendingWorkloadsCmd(stdout))
	return get
}

// pendingSummary is Kueue's PendingWorkloadsSummary.
type pendingSummary struct {
	Items []struct {
		Metadata struct {
			Name              string    `json:"name"`
			Namespace         string    `json:"namespace"`
			CreationTimestamp time.Time `json:"creationTimestamp"`
		} `json:"metadata"`
		Priority               int32  `json:"priority"`
		LocalQueueName         string `json:"localQueueName"`
		PositionInClusterQueue int32  `json:"positionInClusterQueue"`
		PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
	} `json:"items"`
}

func pendingWorkloadsCmd(stdout io.Writer) *cobra.Command {
	var output, namespace string
	var limit, offset int
	cmd := &cobra.Command{
		Use:     "pendingworkloads cq NAME | lq [NAMESPACE/]NAME",
		Aliases: []string{"pendingworkload", "pw"},
		Short:   "A ClusterQueue's or LocalQueue's pending workloads in queue order, with positions (Kueue's visibility API)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			const api = "/apis/visibility.kueue.x-k8s.io/v1beta1"
			var path string
			switch args[0] {
			case "cq", "clusterqueue", "clusterqueues":
				path = api + "/clusterqueues/" + url.PathEscape(args[1]) + "/pendingworkloads"
			case "lq", "localqueue", "localqueues":
				ns, name := namespace, args[1]
				if n, m, ok := strings.Cut(args[1], "/"); ok {
					ns, name = n, m
				}
				if ns == "" {
					return fmt.Errorf("get pendingworkloads lq needs the LocalQueue's namespace: NAMESPACE/NAME or -n NAMESPACE")
				}
				path = api + "/namespaces/" + url.PathEscape(ns) + "/localqueues/" + url.PathEscape(name) + "/pendingworkloads"
			default:
				return fmt.Errorf("unknown queue kind %q: want cq or lq", args[0])
			}
			q := url.Values{}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if offset > 0 {
				q.Set("offset", strconv.Itoa(offset))
			}
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			c := newClient(cmd)
			switch output {
			case "json", "yaml":
				var out map[string]any
				if err := c.do("GET", path, "", nil, &out); err != nil {
					return err
				}
				return printData(stdout, out, output)
			case "":
			default:
				return fmt.Errorf("unknown output %q: want json or yaml", output)
			}
			var s pendingSummary
			if err := c.do("GET", path, "", nil, &s); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "POSITION\tLQ POSITION\tNAMESPACE\tNAME\tLOCALQUEUE\tPRIORITY\tCREATED")
			for _, it := range s.Items {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\n", it.PositionInClusterQueue, it.PositionInLocalQueue, it.Metadata.Namespace,
					it.Metadata.Name, it.LocalQueueName, it.Priority, it.Metadata.CreationTimestamp.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (Kueue's PendingWorkloadsSummary)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the LocalQueue's namespace")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (0: the server's default, 1000)")
	cmd.Flags().IntVar(&offset, "offset", 0, "skip this many")
	return cmd
}
