package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/printers"
)

// selection is what get, list and watch select: the namespace flags and
// the selectors, parsed with apimachinery's parsers before anything is
// sent.
type selection struct {
	namespace     string
	allNamespaces bool
	selector      string
	fieldSelector string
	// extra are field selector terms from kueuectl-style flags; keep, if
	// set, filters what the server listed.
	extra []string
	keep  func(*unstructured.Unstructured) bool
}

func (s *selection) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&s.namespace, "namespace", "n", "", "the namespace (default: the context's, else every namespace)")
	cmd.Flags().BoolVarP(&s.allNamespaces, "all-namespaces", "A", false, "every namespace")
	cmd.Flags().StringVarP(&s.selector, "selector", "l", "", "label selector (e.g. -l team=a,tier!=batch)")
	cmd.Flags().StringVar(&s.fieldSelector, "field-selector", "", "field selector: metadata.name, metadata.namespace; workloads also status, queue, clusterQueue; localqueues clusterQueue; clusterqueues cohort")
}

// query builds the list query, or an error naming the flag at fault.
func (s *selection) query() (url.Values, error) {
	q := url.Values{}
	if s.selector != "" {
		if _, err := labels.Parse(s.selector); err != nil {
			return nil, fmt.Errorf("--selector: %w", err)
		}
		q.Set("labelSelector", s.selector)
	}
	terms := s.extra
	if s.fieldSelector != "" {
		if _, err := fields.ParseSelector(s.fieldSelector); err != nil {
			return nil, fmt.Errorf("--field-selector: %w", err)
		}
		terms = append([]string{s.fieldSelector}, terms...)
	}
	if len(terms) > 0 {
		q.Set("fieldSelector", strings.Join(terms, ","))
	}
	return q, nil
}

// scope is the namespace to read in ("" for all) for kind k.
func (s *selection) scope(c *client, k kind) string {
	switch {
	case !k.Namespaced || s.allNamespaces:
		return ""
	case s.namespace != "":
		return s.namespace
	}
	return c.namespace
}

// fetch reads the objects: the ones named, or the list (every page).
func fetch(c *client, k kind, ns string, names []string, q url.Values) ([]*unstructured.Unstructured, string, error) {
	var out []*unstructured.Unstructured
	for _, name := range names {
		if k.Namespaced && ns == "" {
			if n, nm, ok := strings.Cut(name, "/"); ok {
				u := &unstructured.Unstructured{}
				if err := c.do("GET", k.path(n, nm), "", nil, u); err != nil {
					return nil, "", err
				}
				out = append(out, u)
				continue
			}
			return nil, "", fmt.Errorf("%s %q: give its namespace with -n, or as NAMESPACE/NAME", k.Kind, name)
		}
		u := &unstructured.Unstructured{}
		if err := c.do("GET", k.path(ns, name), "", nil, u); err != nil {
			return nil, "", err
		}
		out = append(out, u)
	}
	if len(names) > 0 {
		return out, "", nil
	}
	var rv string
	page := url.Values{}
	for key, v := range q {
		page[key] = v
	}
	for {
		list := &unstructured.UnstructuredList{}
		if err := c.do("GET", k.path(ns, "")+"?"+page.Encode(), "", nil, list); err != nil {
			return nil, "", err
		}
		if rv == "" {
			rv = list.GetResourceVersion()
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		next := list.GetContinue()
		if next == "" {
			return out, rv, nil
		}
		page.Set("continue", next)
	}
}

func getCmd(stdout io.Writer) *cobra.Command {
	var sel selection
	var watch, watchOnly bool
	var status, clusterQueue, at string
	var out *output
	cmd := &cobra.Command{
		Use:   "get KIND [NAME...]",
		Short: "Show objects as Kueue objects: " + strings.Join(kindNames(), ", "),
		Long: `Show ResourceFlavors, ClusterQueues, LocalQueues, WorkloadPriorityClasses,
PriorityClasses, the Configuration and Workloads as Kueue's objects, status
included, as kubectl would: a table (-o wide for more columns), or -o json,
yaml, name, jsonpath=..., go-template=..., custom-columns=... . -w follows
changes as the server pushes them.

` + watchNote,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeObjects,
		RunE: func(cmd *cobra.Command, args []string) error {
			if at != "" {
				return getAt(cmd, stdout, args, out.format(), sel.namespace, status, clusterQueue, at)
			}
			k, err := lookupKind(args[0])
			if err != nil {
				return err
			}
			if status != "" {
				sel.extra = append(sel.extra, "status="+status)
			}
			if clusterQueue != "" {
				sel.extra = append(sel.extra, "clusterQueue="+clusterQueue)
			}
			return runGet(cmd, stdout, k, args[1:], &sel, out, watch, watchOnly)
		},
	}
	sel.addFlags(cmd)
	out = addOutputFlags(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, follow changes as they happen (the server pushes them)")
	cmd.Flags().BoolVar(&watchOnly, "watch-only", false, "follow changes without listing first")
	cmd.Flags().StringVar(&status, "status", "", "workloads only: pending, admitted, finished or inactive (same as --field-selector status=...)")
	cmd.Flags().StringVar(&clusterQueue, "cluster-queue", "", "workloads only: this ClusterQueue's (same as --field-selector clusterQueue=...)")
	addAtFlag(cmd, &at)
	return cmd
}

func runGet(cmd *cobra.Command, stdout io.Writer, k kind, names []string, sel *selection, out *output, watch, watchOnly bool) error {
	c := newClient(cmd)
	q, err := sel.query()
	if err != nil {
		return err
	}
	ns := sel.scope(c, k)
	withNS := k.Namespaced && ns == ""
	p, err := out.printer(withNS)
	if err != nil {
		return err
	}
	rv := ""
	if k.Resource == "workloads" && out.format() == "wide" {
		loadETAs(c, ns, cmd.ErrOrStderr())
	}
	if !watchOnly {
		items, listRV, err := fetch(c, k, ns, names, q)
		if err != nil {
			return err
		}
		rv = listRV
		if sel.keep != nil {
			items = slices.DeleteFunc(items, func(u *unstructured.Unstructured) bool { return !sel.keep(u) })
		}
		if len(items) == 0 && (out.format() == "" || out.format() == "wide") && !watch {
			where := ""
			if k.Namespaced && ns != "" {
				where = " in " + ns + " namespace"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "No resources found%s.\n", where)
			return nil
		}
		if err := out.print(stdout, p, k, items, len(names) == 1); err != nil {
			return err
		}
	}
	if !watch && !watchOnly {
		return nil
	}
	if len(names) == 1 {
		q.Set("fieldSelector", strings.Trim(q.Get("fieldSelector")+",metadata.name="+names[0], ","))
	} else if len(names) > 1 {
		return fmt.Errorf("watch follows one name or a whole list, not %d names", len(names))
	}
	q.Set("watch", "true")
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	return follow(cmd, stdout, c, k, ns, q, out, withNS, !watchOnly)
}

// watchNote is the help text's word on a watch the server ends.
const watchNote = `A watch the server ends with an ERROR event (410 Expired when jqctl falls
more than 256 events behind) prints the server's message to stderr and
exits non-zero, as kubectl does; run the command again to list afresh.`

// watchEvent is one event of a watch stream.
type watchEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// ended is the error an ERROR event ends a watch with: its object is a
// metav1.Status, not a watched object (410 Expired when the watch fell
// too far behind), nil for any other event.
func (ev watchEvent) ended() error {
	if ev.Type != "ERROR" {
		return nil
	}
	code, _ := ev.Object["code"].(float64)
	msg, _ := ev.Object["message"].(string)
	if reason, _ := ev.Object["reason"].(string); reason != "" {
		msg = reason + ": " + msg
	}
	return fmt.Errorf("the server ended the watch: %w", &statusError{Code: int(code), Message: msg})
}

// follow prints each event of a watch as it arrives: a table row (no
// header once one was printed), or the object in the chosen format.
func follow(cmd *cobra.Command, stdout io.Writer, c *client, k kind, ns string, q url.Values, out *output, withNS, headerDone bool) error {
	body, err := c.stream(cmd.Context(), k.path(ns, "")+"?"+q.Encode())
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
		if f := out.format(); f == "" || f == "wide" {
			tp := printers.NewTablePrinter(printers.PrintOptions{Wide: f == "wide", WithNamespace: withNS, NoHeaders: headerDone || out.noHeaders})
			if err := tp.PrintObj(table(k, []*unstructured.Unstructured{u}), stdout); err != nil {
				return err
			}
			headerDone = true
			continue
		}
		p, err := out.printer(withNS)
		if err != nil {
			return err
		}
		if err := p.PrintObj(u, stdout); err != nil {
			return err
		}
	}
}

func listCmd(stdout io.Writer) *cobra.Command {
	list := &cobra.Command{Use: "list", Short: "List objects as kueuectl does (list clusterqueue|localqueue|workload|resourceflavor)"}
	for _, sub := range []struct {
		kind  string
		names []string
		flags func(*cobra.Command, *selection)
	}{
		{"ClusterQueue", []string{"clusterqueue", "clusterqueues", "cq"}, func(c *cobra.Command, s *selection) {
			var active string
			c.Flags().StringVar(&active, "active", "", "true: only active queues; false: only inactive ones")
			c.PreRunE = func(*cobra.Command, []string) error {
				if active != "" && active != "true" && active != "false" {
					return fmt.Errorf("--active: want true or false, not %q", active)
				}
				if active != "" {
					s.extra = append(s.extra, "active="+active)
				}
				return nil
			}
		}},
		{"LocalQueue", []string{"localqueue", "localqueues", "lq"}, func(c *cobra.Command, s *selection) {
			var cq string
			c.Flags().StringVarP(&cq, "clusterqueue", "c", "", "only the LocalQueues of this ClusterQueue")
			c.PreRunE = func(*cobra.Command, []string) error {
				if cq != "" {
					s.extra = append(s.extra, "clusterQueue="+cq)
				}
				return nil
			}
		}},
		{"Workload", []string{"workload", "workloads", "wl"}, func(c *cobra.Command, s *selection) {
			var cq, lq, status string
			c.Flags().StringVarP(&cq, "clusterqueue", "c", "", "only the workloads of this ClusterQueue")
			c.Flags().StringVarP(&lq, "localqueue", "q", "", "only the workloads of this LocalQueue")
			c.Flags().StringVar(&status, "status", "", "only workloads in this status, as kueuectl: all, pending, quotareserved, admitted or finished; "+
				"or jetqueue's inactive. Without admission checks a reservation is an admission, so quotareserved (reserved, not yet admitted) lists none")
			c.PreRunE = func(*cobra.Command, []string) error {
				for label, v := range map[string]string{"clusterQueue": cq, "queue": lq} {
					if v != "" {
						s.extra = append(s.extra, label+"="+v)
					}
				}
				switch st := strings.ToLower(status); st {
				case "", "all":
				case "pending", "admitted", "finished", "inactive":
					s.extra = append(s.extra, "status="+st)
				case "quotareserved":
					s.keep = quotaReservedNotAdmitted
				default:
					return fmt.Errorf(`invalid status value (%s). Must be "all", "pending", "quotareserved", "admitted", "finished" or "inactive"`, status)
				}
				return nil
			}
		}},
		{"ResourceFlavor", []string{"resourceflavor", "resourceflavors", "rf"}, nil},
	} {
		var sel selection
		k, _ := kindOf(sub.kind)
		cmd := &cobra.Command{
			Use:     sub.names[0],
			Aliases: sub.names[1:],
			Short:   "List " + sub.kind + "s",
			Args:    cobra.NoArgs,
		}
		sel.addFlags(cmd)
		out := addOutputFlags(cmd)
		if sub.flags != nil {
			sub.flags(cmd, &sel)
		}
		cmd.RunE = func(cmd *cobra.Command, _ []string) error {
			if k.Kind == "ClusterQueue" {
				return listClusterQueues(cmd, stdout, k, &sel, out)
			}
			return runGet(cmd, stdout, k, nil, &sel, out, false, false)
		}
		list.AddCommand(cmd)
	}
	return list
}

// listClusterQueues filters on --active here: activity is a condition,
// not a field the server selects on.
func listClusterQueues(cmd *cobra.Command, stdout io.Writer, k kind, sel *selection, out *output) error {
	want := ""
	var rest []string
	for _, t := range sel.extra {
		if v, ok := strings.CutPrefix(t, "active="); ok {
			want = v
			continue
		}
		rest = append(rest, t)
	}
	sel.extra = rest
	c := newClient(cmd)
	q, err := sel.query()
	if err != nil {
		return err
	}
	items, _, err := fetch(c, k, "", nil, q)
	if err != nil {
		return err
	}
	var kept []*unstructured.Unstructured
	for _, u := range items {
		active := condition(u, "Active") == "True"
		if want == "" || (want == "true") == active {
			kept = append(kept, u)
		}
	}
	p, err := out.printer(false)
	if err != nil {
		return err
	}
	return out.print(stdout, p, k, kept, false)
}

// completeObjects completes a kind, then the names of its objects (read
// from the server).
func completeObjects(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return kindNames(), cobra.ShellCompDirectiveNoFileComp
	}
	k, err := lookupKind(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	c := newClient(cmd)
	ns, _ := cmd.Flags().GetString("namespace")
	if ns == "" && k.Namespaced {
		ns = c.namespace
	}
	items, _, err := fetch(c, k, ns, nil, url.Values{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	for _, u := range items {
		name := u.GetName()
		if k.Namespaced && ns == "" {
			name = u.GetNamespace() + "/" + name
		}
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func openFile(path string) (*os.File, error) { return os.Open(path) }

// quotaReservedNotAdmitted is kueuectl's quotareserved status (Kueue's
// workload.Status): QuotaReserved, not Admitted, not Finished.
func quotaReservedNotAdmitted(u *unstructured.Unstructured) bool {
	is := map[string]bool{}
	for _, c := range conditions(u) {
		is[c.Type] = c.Status == metav1.ConditionTrue
	}
	return is["QuotaReserved"] && !is["Admitted"] && !is["Finished"]
}
