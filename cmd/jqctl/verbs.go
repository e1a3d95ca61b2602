package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/quota"
)

func addClientCommands(root *cobra.Command, stdout io.Writer) {
	root.PersistentFlags().String("server", defaultServer(), "jetqueue API server (env JQ_SERVER; without either, the current context's)")
	root.PersistentFlags().String("token", "", "bearer token (overrides the context's)")
	root.PersistentFlags().String("context", "", "the context of jqctl's config to use (default: its current-context)")
	root.AddCommand(configCmd(stdout),
		applyCmd(stdout), submitCmd(stdout), getCmd(stdout), describeCmd(stdout), explainCmd(stdout), projectionCmd(stdout),
		watchCmd(stdout),
		deleteCmd(stdout), actionCmd(stdout, "finish", "Mark a workload's job finished, releasing its quota"),
		actionCmd(stdout, "podsready", "Report that all of a workload's pods are ready"),
	)
}

func contentType(data []byte) string {
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "{") {
		return "application/json"
	}
	return "application/yaml"
}

func applyCmd(stdout io.Writer) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update ResourceFlavors, ClusterQueues, LocalQueues, priority classes and the Configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			var out struct {
				Applied []struct{ Kind, Name, Namespace, Action string } `json:"applied"`
			}
			if err := newClient(cmd).do("POST", "/v1/apply", contentType(data), data, &out); err != nil {
				return err
			}
			for _, a := range out.Applied {
				name := a.Name
				if a.Namespace != "" {
					name = a.Namespace + "/" + a.Name
				}
				fmt.Fprintf(stdout, "%s/%s %s\n", strings.ToLower(a.Kind), name, a.Action)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifest file (YAML or JSON, several documents allowed; - for stdin)")
	return cmd
}

func submitCmd(stdout io.Writer) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Submit a Workload or a batch/v1 Job with the kueue.x-k8s.io/queue-name label",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			var out struct{ Namespace, Name, UID string }
			if err := newClient(cmd).do("POST", "/v1/workloads", contentType(data), data, &out); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "workload/%s/%s submitted (uid %s)\n", out.Namespace, out.Name, out.UID)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "Workload or Job manifest (- for stdin)")
	return cmd
}

type workloadView struct {
	Namespace    string                       `json:"namespace"`
	Name         string                       `json:"name"`
	LocalQueue   string                       `json:"localQueue"`
	ClusterQueue string                       `json:"clusterQueue"`
	Priority     int32                        `json:"priority"`
	Status       string                       `json:"status"`
	Assignment   map[string]map[string]string `json:"assignment,omitempty"`
	Reason       string                       `json:"reason,omitempty"`
	Message      string                       `json:"message,omitempty"`
	Evictions    int32                        `json:"evictions"`
}

func getCmd(stdout io.Writer) *cobra.Command {
	var output, namespace, status, queue string
	cmd := &cobra.Command{
		Use:       "get workloads|clusterqueue NAME",
		Short:     "List workloads (table, wide, json or yaml), or show a ClusterQueue's usage",
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: []string{"workloads", "clusterqueue"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			switch args[0] {
			case "workloads", "workload", "wl":
				q := url.Values{}
				for k, v := range map[string]string{"namespace": namespace, "status": status, "clusterQueue": queue} {
					if v != "" {
						q.Set(k, v)
					}
				}
				var items []workloadView
				for after := ""; ; {
					q.Set("after", after)
					q.Set("limit", "1000")
					var page struct {
						Items []workloadView `json:"items"`
						Next  string         `json:"next"`
					}
					if err := c.do("GET", "/v1/workloads?"+q.Encode(), "", nil, &page); err != nil {
						return err
					}
					items = append(items, page.Items...)
					if after = page.Next; after == "" {
						break
					}
				}
				return printWorkloads(stdout, items, output)
			case "clusterqueue", "clusterqueues", "cq":
				if len(args) != 2 {
					return fmt.Errorf("get clusterqueue needs the queue's name")
				}
				var out map[string]any
				if err := c.do("GET", "/v1/clusterqueues/"+url.PathEscape(args[1]), "", nil, &out); err != nil {
					return err
				}
				return printData(stdout, out, output)
			}
			return fmt.Errorf("unknown resource %q: want workloads or clusterqueue", args[0])
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace")
	cmd.Flags().StringVar(&status, "status", "", "only this status: pending, admitted, finished, inactive")
	cmd.Flags().StringVar(&queue, "cluster-queue", "", "only this ClusterQueue")
	return cmd
}

func printWorkloads(w io.Writer, items []workloadView, output string) error {
	switch output {
	case "json", "yaml":
		if items == nil {
			items = []workloadView{}
		}
		return printData(w, map[string]any{"items": items}, output)
	case "", "wide":
	default:
		return fmt.Errorf("unknown output %q: want wide, json or yaml", output)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAMESPACE\tNAME\tQUEUE\tCLUSTERQUEUE\tPRIORITY\tSTATUS\tREASON"
	if output == "wide" {
		header += "\tFLAVORS\tEVICTIONS"
	}
	fmt.Fprintln(tw, header)
	for _, v := range items {
		reason := v.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s", v.Namespace, v.Name, v.LocalQueue, v.ClusterQueue, v.Priority, v.Status, reason)
		if output == "wide" {
			fmt.Fprintf(tw, "\t%s\t%d", flavors(v.Assignment), v.Evictions)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// flavors renders an assignment as podSet:resource=flavor, sorted.
func flavors(a map[string]map[string]string) string {
	var parts []string
	for ps, res := range a {
		for r, f := range res {
			parts = append(parts, fmt.Sprintf("%s:%s=%s", ps, r, f))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func printData(w io.Writer, v any, output string) error {
	switch output {
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	default:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
}

func describeCmd(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe NAMESPACE/NAME",
		Short: "Show a workload with its whole event history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitKey(args[0])
			if err != nil {
				return err
			}
			var out struct {
				workloadView
				Events []struct {
					Seq  uint64          `json:"seq"`
					Type string          `json:"type"`
					Time string          `json:"time"`
					Data json.RawMessage `json:"data"`
				} `json:"events"`
			}
			if err := newClient(cmd).do("GET", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name), "", nil, &out); err != nil {
				return err
			}
			if output != "" {
				return printData(stdout, out, output)
			}
			v := out.workloadView
			fmt.Fprintf(stdout, "Name:          %s/%s\nLocalQueue:    %s\nClusterQueue:  %s\nPriority:      %d\nStatus:        %s\nFlavors:       %s\nEvictions:     %d\n",
				v.Namespace, v.Name, v.LocalQueue, v.ClusterQueue, v.Priority, v.Status, flavors(v.Assignment), v.Evictions)
			if v.Reason != "" {
				fmt.Fprintf(stdout, "Reason:        %s\nMessage:       %s\n", v.Reason, v.Message)
			}
			fmt.Fprintln(stdout, "Events:")
			tw := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "  SEQ\tTIME\tTYPE")
			for _, e := range out.Events {
				fmt.Fprintf(tw, "  %d\t%s\t%s\n", e.Seq, e.Time, strings.TrimSuffix(strings.TrimPrefix(e.Type, "io.jetqueue.workload."), ".v1"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of text")
	return cmd
}

func deleteCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "delete workload NAMESPACE/NAME | KIND NAME | KIND NAMESPACE/NAME",
		Short: "Delete a workload (releasing its quota) or a configuration object",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			kind, target := args[0], args[1]
			path := "/v1/" + url.PathEscape(kind) + "/" + target
			if k := strings.ToLower(kind); k == "workload" || k == "workloads" || k == "wl" {
				ns, name, err := splitKey(target)
				if err != nil {
					return err
				}
				path = "/v1/workloads/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
			}
			if err := c.do("DELETE", path, "", nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s/%s deleted\n", strings.ToLower(kind), target)
			return nil
		},
	}
}

func actionCmd(stdout io.Writer, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAMESPACE/NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitKey(args[0])
			if err != nil {
				return err
			}
			body := []byte(nil)
			if verb == "finish" {
				body = []byte(`{"succeeded":true}`)
			}
			if err := newClient(cmd).do("POST", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/"+verb, "application/json", body, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "workload/%s/%s %s\n", ns, name, verb)
			return nil
		},
	}
}

func splitKey(k string) (string, string, error) {
	ns, name, ok := strings.Cut(k, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want NAMESPACE/NAME", k)
	}
	return ns, name, nil
}

func explainCmd(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/NAME",
		Short: "Say why a workload is where it is: the reason, the blocking flavor and resource, the shortfall, who is ahead",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := splitKey(args[0])
			if err != nil {
				return err
			}
			var ex struct {
				workloadView
				Detail *struct {
					Reason    string `json:"reason"`
					PodSet    string `json:"podSet"`
					Resource  string `json:"resource"`
					Flavor    string `json:"flavor"`
					Cohort    string `json:"cohort"`
					Shortfall int64  `json:"shortfall"`
					Message   string `json:"message"`
				} `json:"detail"`
				Ahead      []string `json:"ahead"`
				AheadCount int      `json:"aheadCount"`
			}
			if err := newClient(cmd).do("GET", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/explain", "", nil, &ex); err != nil {
				return err
			}
			if output != "" {
				return printData(stdout, ex, output)
			}
			fmt.Fprintf(stdout, "%s/%s is %s", ns, name, ex.Status)
			if ex.ClusterQueue != "" {
				fmt.Fprintf(stdout, " in ClusterQueue %s", ex.ClusterQueue)
			}
			fmt.Fprintln(stdout, ".")
			if d := ex.Detail; d != nil {
				fmt.Fprintf(stdout, "Reason:    %s\n", d.Reason)
				if d.Resource != "" {
					fmt.Fprintf(stdout, "Blocked:   %s on flavor %s (podSet %s)", d.Resource, d.Flavor, d.PodSet)
					if d.Cohort != "" {
						fmt.Fprintf(stdout, " in cohort %s", d.Cohort)
					}
					fmt.Fprintln(stdout)
				}
				if d.Shortfall > 0 {
					fmt.Fprintf(stdout, "Shortfall: %s %s\n", quota.Format(corev1.ResourceName(d.Resource), d.Shortfall), d.Resource)
				}
				fmt.Fprintf(stdout, "Message:   %s\n", d.Message)
			} else if ex.Reason != "" {
				fmt.Fprintf(stdout, "Reason:    %s\n", ex.Reason)
			}
			if ex.Status == "pending" {
				fmt.Fprintf(stdout, "Ahead:     %d workload(s)", ex.AheadCount)
				if len(ex.Ahead) > 0 {
					fmt.Fprintf(stdout, ": %s", strings.Join(ex.Ahead, ", "))
					if ex.AheadCount > len(ex.Ahead) {
						fmt.Fprint(stdout, ", …")
					}
				}
				fmt.Fprintln(stdout)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of text")
	return cmd
}

func projectionCmd(stdout io.Writer) *cobra.Command {
	proj := &cobra.Command{Use: "projection", Short: "Operate the PostgreSQL projection"}
	proj.AddCommand(&cobra.Command{
		Use:   "rebuild",
		Short: "Drop the projection and replay every event into it, waiting until it has caught up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.do("POST", "/v1/projection/rebuild", "", nil, nil); err != nil {
				return err
			}
			var out struct {
				Seq uint64 `json:"seq"`
			}
			if err := c.do("GET", "/v1/sync?timeout=5m", "", nil, &out); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "projection rebuilt up to event %d\n", out.Seq)
			return nil
		},
	})
	return proj
}

func watchCmd(stdout io.Writer) *cobra.Command {
	var namespace string
	var interval time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print a line whenever a workload appears, changes status or reason, or goes away",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			seen := map[string]string{}
			for round := 0; count == 0 || round < count; round++ {
				if round > 0 {
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(interval):
					}
				}
				now := map[string]string{}
				q := url.Values{"limit": {"1000"}}
				if namespace != "" {
					q.Set("namespace", namespace)
				}
				for after := ""; ; {
					q.Set("after", after)
					var page struct {
						Items []workloadView `json:"items"`
						Next  string         `json:"next"`
					}
					if err := c.do("GET", "/v1/workloads?"+q.Encode(), "", nil, &page); err != nil {
						return err
					}
					for _, v := range page.Items {
						state := v.Status
						if v.Reason != "" {
							state += " (" + v.Reason + ")"
						}
						now[v.Namespace+"/"+v.Name] = state
					}
					if after = page.Next; after == "" {
						break
					}
				}
				for _, k := range sortedKeys(now) {
					if seen[k] != now[k] {
						fmt.Fprintf(stdout, "%s\t%s\n", k, now[k])
					}
				}
				for _, k := range sortedKeys(seen) {
					if _, ok := now[k]; !ok {
						fmt.Fprintf(stdout, "%s\tdeleted\n", k)
					}
				}
				seen = now
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to look")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many looks (0: until interrupted)")
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
