package main

import (
	"context"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/quota"
)

func addClientCommands(root *cobra.Command, stdout io.Writer) {
	root.PersistentFlags().String("server", defaultServer(), "jetqueue API server (env JQ_SERVER; without either, the current context's)")
	root.PersistentFlags().String("token", "", "bearer token (overrides the context's)")
	root.PersistentFlags().String("context", "", "the context of jqctl's config to use (default: its current-context)")
	root.AddCommand(configCmd(stdout),
		applyCmd(stdout), submitCmd(stdout), withPendingWorkloads(getCmd(stdout), stdout), describeCmd(stdout), explainCmd(stdout), projectionCmd(stdout),
		watchCmd(stdout), listCmd(stdout), diffCmd(stdout), versionCmd(stdout),
		createCmd(stdout), stopResumeCmd(stdout, "stop"), stopResumeCmd(stdout, "resume"),
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
	ETA          *etaView                     `json:"eta,omitempty"`
}

// getAt answers get --at: the views of the history API
// (/v1/workloads?at=, /v1/clusterqueues/NAME?at=), as the system stood at
// that time; the object API answers only the present.
func getAt(cmd *cobra.Command, stdout io.Writer, args []string, output, namespace, status, queue, at string) error {
	c := newClient(cmd)
	switch args[0] {
	case "workloads", "workload", "wl":
		q := url.Values{}
		for k, v := range map[string]string{"namespace": namespace, "status": status, "clusterQueue": queue, "at": at} {
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
			return fmt.Errorf("get clusterqueue --at needs the queue's name")
		}
		var out map[string]any
		if err := c.do("GET", "/v1/clusterqueues/"+url.PathEscape(args[1])+atQuery(at), "", nil, &out); err != nil {
			return err
		}
		return printData(stdout, out, output)
	}
	return fmt.Errorf("get --at: unknown resource %q: want workloads or clusterqueue", args[0])
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
		header += "\tFLAVORS\tEVICTIONS\tETA\tASSUMPTION"
	}
	fmt.Fprintln(tw, header)
	for _, v := range items {
		reason := v.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s", v.Namespace, v.Name, v.LocalQueue, v.ClusterQueue, v.Priority, v.Status, reason)
		if output == "wide" {
			fmt.Fprintf(tw, "\t%s\t%d\t%s\t%s", flavors(v.Assignment), v.Evictions, etaCell(v.ETA), assumptionCell(v.ETA))
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
	var output, namespace string
	cmd := &cobra.Command{
		Use:               "describe NAMESPACE/NAME | describe KIND NAME",
		Short:             "Show a workload with its whole event history, or any object with its status",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeObjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0]
			if len(args) == 2 {
				k, err := lookupKind(args[0])
				if err != nil {
					return err
				}
				target = args[1]
				if k.Kind != "Workload" {
					return describeObject(cmd, stdout, k, namespace, target, output)
				}
				if !strings.Contains(target, "/") {
					ns := namespace
					if ns == "" {
						ns = newClient(cmd).namespace
					}
					target = ns + "/" + target
				}
			}
			ns, name, err := splitKey(target)
			if err != nil {
				return err
			}
			if output != "" {
				// The Kueue Workload, as get -o json|yaml prints it.
				k, err := lookupKind("workload")
				if err != nil {
					return err
				}
				return describeObject(cmd, stdout, k, ns, name, output)
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
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of text: the Kueue object, as get -o json|yaml prints it")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace of a namespaced object")
	return cmd
}

// printAsGet prints one object read from its /apis/ path as get -o
// json|yaml prints it: the same object through the same printer.
func printAsGet(w io.Writer, u *unstructured.Unstructured, format string) error {
	if format != "json" && format != "yaml" {
		return fmt.Errorf("describe -o %q: json or yaml", format)
	}
	f := genericclioptions.NewPrintFlags("")
	f.OutputFormat = &format
	p, err := f.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(u, w)
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
	var output, at string
	counterfactual := true
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
				historyFields
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
			if err := newClient(cmd).do("GET", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/explain"+explainQuery(at, counterfactual), "", nil, &ex); err != nil {
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
			printETA(stdout, ex.ETA)
			ex.print(stdout)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of text")
	cmd.Flags().BoolVar(&counterfactual, "counterfactual", true, "also list the smallest changes that would admit a pending workload now (each verified by the core)")
	addAtFlag(cmd, &at)
	return cmd
}

func projectionCmd(stdout io.Writer) *cobra.Command {
	proj := &cobra.Command{Use: "projection", Short: "Operate the PostgreSQL projection"}
	var every time.Duration
	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Drop the projection and replay every event into it, waiting until it has caught up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			if err := c.do("POST", "/v1/projection/rebuild", "", nil, nil); err != nil {
				return err
			}
			if err := rebuildProgress(cmd.Context(), c, cmd.ErrOrStderr(), every); err != nil {
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
	}
	rebuild.Flags().DurationVar(&every, "progress", 2*time.Second, "how often to print the rebuild's progress on stderr (0: never)")
	proj.AddCommand(rebuild)
	return proj
}

// rebuildProgress prints, every so often, how far the projection has
// come of the stream as it was when the rebuild began, until it has
// projected that much; the last line says it has.
func rebuildProgress(ctx context.Context, c *client, w io.Writer, every time.Duration) error {
	if every <= 0 {
		return nil
	}
	var p struct {
		Seq       uint64 `json:"seq"`
		StreamSeq uint64 `json:"streamSeq"`
	}
	var target uint64
	start := time.Now()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(every):
			}
		}
		if err := c.do("GET", "/v1/projection/rebuild", "", nil, &p); err != nil {
			return err
		}
		if first {
			target = p.StreamSeq
		}
		done := min(p.Seq, target)
		fmt.Fprintf(w, "rebuilding the projection: %d of %d events (%d%%), %s\n", done, target,
			done*100/max(target, 1), time.Since(start).Round(time.Second))
		if done >= target {
			return nil
		}
	}
}

func watchCmd(stdout io.Writer) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print every workload as it is now, then every change as it happens (the server pushes them)",
		Long:  "Print every workload as it is now, then every change as it happens (the server pushes them).\n\n" + watchNote,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := newClient(cmd)
			k, _ := kindOf("Workload")
			body, err := c.stream(cmd.Context(), k.path(namespace, "")+"?watch=true")
			if err != nil {
				return err
			}
			defer body.Close()
			dec := json.NewDecoder(body)
			for {
				var ev watchEvent
				if err := dec.Decode(&ev); err != nil {
					if err == io.EOF || cmd.Context().Err() != nil {
						return nil
					}
					return err
				}
				if err := ev.ended(); err != nil {
					return err
				}
				u := &unstructured.Unstructured{Object: ev.Object}
				state, reason := workloadState(u)
				if ev.Type == "DELETED" {
					state, reason = "deleted", ""
				}
				if reason != "" {
					state += " (" + reason + ")"
				}
				fmt.Fprintf(stdout, "%s/%s\t%s\n", u.GetNamespace(), u.GetName(), state)
			}
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace")
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

// describeObject prints one object as kubectl describe lays it out:
// name, namespace, labels, then its spec and status.
func describeObject(cmd *cobra.Command, stdout io.Writer, k kind, ns, name, output string) error {
	c := newClient(cmd)
	if k.Namespaced {
		if a, b, ok := strings.Cut(name, "/"); ok {
			ns, name = a, b
		}
		if ns == "" {
			ns = c.namespace
		}
		if ns == "" {
			return fmt.Errorf("%s %q: give its namespace with -n, or as NAMESPACE/NAME", k.Kind, name)
		}
	}
	u := &unstructured.Unstructured{}
	if err := c.do("GET", k.path(ns, name), "", nil, u); err != nil {
		return err
	}
	if output != "" {
		return printAsGet(stdout, u, output)
	}
	labels := joinMap(u.GetLabels())
	if labels == "" {
		labels = "<none>"
	}
	fmt.Fprintf(stdout, "Name:         %s\n", u.GetName())
	if k.Namespaced {
		fmt.Fprintf(stdout, "Namespace:    %s\n", u.GetNamespace())
	}
	fmt.Fprintf(stdout, "Labels:       %s\nAPI Version:  %s\nKind:         %s\n", labels, u.GetAPIVersion(), u.GetKind())
	for _, part := range []string{"spec", "value", "description", "globalDefault", "waitForPodsReady", "status"} {
		v, ok := u.Object[part]
		if !ok {
			continue
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		title := strings.ToUpper(part[:1]) + part[1:]
		if strings.Contains(strings.TrimSpace(string(b)), "\n") || strings.HasSuffix(strings.TrimSpace(string(b)), ":") || part == "spec" || part == "status" {
			fmt.Fprintf(stdout, "%s:\n", title)
			for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				fmt.Fprintf(stdout, "  %s\n", line)
			}
		} else {
			fmt.Fprintf(stdout, "%-13s %s", title+":", b)
		}
	}
	return nil
}
