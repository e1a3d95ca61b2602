package main

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	kubectlget "k8s.io/kubectl/pkg/cmd/get"
)

// kind is one kind of jetqueue's object API (ingest's /apis/...), with
// the names kubectl and kueuectl know it by.
type kind struct {
	Group, Version, Resource, Kind string
	Namespaced                     bool
	Names                          []string
	// columns and row render the table (wide adds the columns marked so).
	columns []metav1.TableColumnDefinition
	row     func(u *unstructured.Unstructured) []any
}

func (k kind) apiVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// path is the API path of a list (name "") or of one object; namespace
// "" lists a namespaced kind across every namespace.
func (k kind) path(namespace, name string) string {
	p := "/apis/" + k.apiVersion()
	if k.Namespaced && namespace != "" {
		p += "/namespaces/" + url.PathEscape(namespace)
	}
	p += "/" + k.Resource
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

func col(name string, wide ...bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string"}
	if len(wide) > 0 && wide[0] {
		c.Priority = 1
	}
	return c
}

var kinds = []kind{
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueues", Kind: "ClusterQueue",
		Names:   []string{"clusterqueue", "clusterqueues", "cq", "clusterqueue.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("COHORT"), col("PENDING WORKLOADS"), col("ADMITTED WORKLOADS"), col("ACTIVE"), col("AGE"), col("RESERVED", true)},
		row: func(u *unstructured.Unstructured) []any {
			return []any{u.GetName(), str(u, "spec", "cohort"), num(u, "status", "pendingWorkloads"), num(u, "status", "admittedWorkloads"),
				condition(u, "Active"), age(u), reserved(u)}
		}},
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "localqueues", Kind: "LocalQueue", Namespaced: true,
		Names:   []string{"localqueue", "localqueues", "lq", "queue", "queues", "localqueue.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("CLUSTERQUEUE"), col("PENDING WORKLOADS"), col("ADMITTED WORKLOADS"), col("ACTIVE"), col("AGE")},
		row: func(u *unstructured.Unstructured) []any {
			return []any{u.GetName(), str(u, "spec", "clusterQueue"), num(u, "status", "pendingWorkloads"), num(u, "status", "admittedWorkloads"),
				condition(u, "Active"), age(u)}
		}},
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "resourceflavors", Kind: "ResourceFlavor",
		Names:   []string{"resourceflavor", "resourceflavors", "rf", "flavor", "flavors", "resourceflavor.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("AGE"), col("NODE LABELS", true)},
		row: func(u *unstructured.Unstructured) []any {
			m, _, _ := unstructured.NestedStringMap(u.Object, "spec", "nodeLabels")
			return []any{u.GetName(), age(u), joinMap(m)}
		}},
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "workloadpriorityclasses", Kind: "WorkloadPriorityClass",
		Names:   []string{"workloadpriorityclass", "workloadpriorityclasses", "wpc", "workloadpriorityclass.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("VALUE"), col("AGE")},
		row:     func(u *unstructured.Unstructured) []any { return []any{u.GetName(), num(u, "value"), age(u)} }},
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "workloads", Kind: "Workload", Namespaced: true,
		Names: []string{"workload", "workloads", "wl", "workload.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("QUEUE"), col("RESERVED IN"), col("PRIORITY"), col("STATUS"), col("REASON"),
			col("AGE"), col("ETA", true), col("ASSUMPTION", true), col("FLAVORS", true), col("REQUESTS", true)},
		row: func(u *unstructured.Unstructured) []any {
			st, reason := workloadState(u)
			return []any{u.GetName(), str(u, "spec", "queueName"), str(u, "status", "admission", "clusterQueue"), num(u, "spec", "priority"),
				st, reason, age(u), etaColumn(u), assumptionColumn(u), assignedFlavors(u), requests(u)}
		}},
	{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Kind: "PriorityClass",
		Names:   []string{"priorityclass", "priorityclasses", "pc", "priorityclass.scheduling.k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("VALUE"), col("GLOBAL-DEFAULT"), col("AGE")},
		row: func(u *unstructured.Unstructured) []any {
			g, _, _ := unstructured.NestedBool(u.Object, "globalDefault")
			return []any{u.GetName(), num(u, "value"), fmt.Sprint(g), age(u)}
		}},
	{Group: "config.kueue.x-k8s.io", Version: "v1beta1", Resource: "configurations", Kind: "Configuration",
		Names:   []string{"configuration", "configurations", "config", "configuration.config.kueue.x-k8s.io"},
		columns: []metav1.TableColumnDefinition{col("NAME"), col("WAITFORPODSREADY")},
		row: func(u *unstructured.Unstructured) []any {
			e, _, _ := unstructured.NestedBool(u.Object, "waitForPodsReady", "enable")
			return []any{u.GetName(), fmt.Sprint(e)}
		}},
}

// kindNames lists every name of every kind, for completion and errors.
func kindNames() []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Names[:3]...)
	}
	return out
}

// lookupKind finds a kind by any of its names (case-insensitive).
func lookupKind(name string) (kind, error) {
	n := strings.ToLower(name)
	for _, k := range kinds {
		for _, alias := range k.Names {
			if n == alias || n == strings.ToLower(k.Kind) {
				return k, nil
			}
		}
	}
	return kind{}, fmt.Errorf("unknown resource type %q: want one of %s", name, strings.Join(kindNames(), ", "))
}

// kindOf finds a kind by its Kind.
func kindOf(k string) (kind, bool) {
	for _, d := range kinds {
		if d.Kind == k {
			return d, true
		}
	}
	return kind{}, false
}

func str(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func num(u *unstructured.Unstructured, path ...string) string {
	v := str(u, path...)
	if v == "" {
		return "0"
	}
	return v
}

func age(u *unstructured.Unstructured) string {
	t := u.GetCreationTimestamp()
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func conditions(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

func condition(u *unstructured.Unstructured, typ string) string {
	for _, c := range conditions(u) {
		if c.Type == typ {
			if c.Status == metav1.ConditionTrue {
				return "True"
			}
			return "False (" + c.Reason + ")"
		}
	}
	return "Unknown"
}

// workloadState is jetqueue's status word for a Workload (pending,
// admitted, finished, inactive) and the reason of the condition that
// says why, from its Kueue conditions.
func workloadState(u *unstructured.Unstructured) (string, string) {
	byType := map[string]metav1.Condition{}
	for _, c := range conditions(u) {
		byType[c.Type] = c
	}
	switch {
	case byType["Finished"].Status == metav1.ConditionTrue:
		return "finished", byType["Finished"].Reason
	case byType["Admitted"].Status == metav1.ConditionTrue:
		return "admitted", ""
	}
	if active, ok, _ := unstructured.NestedBool(u.Object, "spec", "active"); ok && !active {
		return "inactive", byType["Evicted"].Reason
	}
	if c := byType["Evicted"]; c.Status == metav1.ConditionTrue {
		return "pending", c.Reason
	}
	return "pending", byType["QuotaReserved"].Reason
}

// assignedFlavors renders an admission as podSet:resource=flavor, sorted.
func assignedFlavors(u *unstructured.Unstructured) string {
	psas, _, _ := unstructured.NestedSlice(u.Object, "status", "admission", "podSetAssignments")
	var parts []string
	for _, p := range psas {
		m, _ := p.(map[string]any)
		fl, _, _ := unstructured.NestedStringMap(m, "flavors")
		for r, f := range fl {
			parts = append(parts, fmt.Sprintf("%v:%s=%s", m["name"], r, f))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// requests sums a Workload's requests (count × container requests) per
// resource, in human units: "cpu 4, memory 36Gi".
func requests(u *unstructured.Unstructured) string {
	podSets, _, _ := unstructured.NestedSlice(u.Object, "spec", "podSets")
	total := corev1.ResourceList{}
	for _, p := range podSets {
		m, _ := p.(map[string]any)
		var ps struct {
			Count    int64                  `json:"count"`
			Template corev1.PodTemplateSpec `json:"template"`
		}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ps) != nil {
			continue
		}
		for _, c := range ps.Template.Spec.Containers {
			for r, q := range c.Resources.Requests {
				q = q.DeepCopy()
				for range ps.Count - 1 {
					q.Add(c.Resources.Requests[r])
				}
				cur := total[r]
				cur.Add(q)
				total[r] = cur
			}
		}
	}
	return human(total)
}

// human renders quantities with their own units, sorted by resource:
// "cpu 4, memory 36Gi".
func human(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for r := range l {
		names = append(names, string(r))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := l[corev1.ResourceName(n)]
		parts = append(parts, n+" "+q.String())
	}
	return strings.Join(parts, ", ")
}

// reserved renders a ClusterQueue's reservations against its nominal
// quota: "rf: cpu 4/8, memory 36Gi/64Gi".
func reserved(u *unstructured.Unstructured) string {
	nominal := map[[2]string]string{}
	rgs, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
	for _, rg := range rgs {
		fls, _, _ := unstructured.NestedSlice(rg.(map[string]any), "flavors")
		for _, f := range fls {
			fm := f.(map[string]any)
			rs, _, _ := unstructured.NestedSlice(fm, "resources")
			for _, r := range rs {
				rm := r.(map[string]any)
				nominal[[2]string{fmt.Sprint(fm["name"]), fmt.Sprint(rm["name"])}] = fmt.Sprint(rm["nominalQuota"])
			}
		}
	}
	fls, _, _ := unstructured.NestedSlice(u.Object, "status", "flavorsReservation")
	var parts []string
	for _, f := range fls {
		fm := f.(map[string]any)
		rs, _, _ := unstructured.NestedSlice(fm, "resources")
		var cells []string
		for _, r := range rs {
			rm := r.(map[string]any)
			total := fmt.Sprint(rm["total"])
			if q, err := resource.ParseQuantity(total); err == nil {
				total = q.String()
			}
			cells = append(cells, fmt.Sprintf("%v %s/%s", rm["name"], total, nominal[[2]string{fmt.Sprint(fm["name"]), fmt.Sprint(rm["name"])}]))
		}
		parts = append(parts, fmt.Sprintf("%v: %s", fm["name"], strings.Join(cells, ", ")))
	}
	return strings.Join(parts, "; ")
}

func joinMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// table renders objects of one kind as a metav1.Table for cli-runtime's
// table printer.
func table(k kind, items []*unstructured.Unstructured) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: k.columns}
	for _, u := range items {
		cells := k.row(u)
		for i, c := range cells {
			if s, ok := c.(string); ok && s == "" {
				cells[i] = "<none>"
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: u}})
	}
	return t
}

// output is how get and list print: -o and its flags, through
// cli-runtime's printers (json, yaml, name, jsonpath, go-template) and
// kubectl's custom-columns; a table otherwise.
type output struct {
	flags     *genericclioptions.PrintFlags
	noHeaders bool
}

func addOutputFlags(cmd *cobra.Command) *output {
	o := &output{flags: genericclioptions.NewPrintFlags("")}
	o.flags.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "print tables without headers")
	cmd.Flag("output").Usage = "json, yaml, name, wide, jsonpath=..., jsonpath-file=..., go-template=..., custom-columns=SPEC, custom-columns-file=FILE"
	return o
}

func (o *output) format() string { return *o.flags.OutputFormat }

// printer returns the printer for the chosen format; withNamespace
// adds the NAMESPACE column to tables.
func (o *output) printer(withNamespace bool) (printers.ResourcePrinter, error) {
	f := o.format()
	switch {
	case f == "" || f == "wide":
		return printers.NewTablePrinter(printers.PrintOptions{Wide: f == "wide", WithNamespace: withNamespace, NoHeaders: o.noHeaders}), nil
	case strings.HasPrefix(f, "custom-columns"):
		spec, file, _ := strings.Cut(f, "=")
		if spec == "custom-columns-file" {
			r, err := openFile(file)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return kubectlget.NewCustomColumnsPrinterFromTemplate(r, unstructured.UnstructuredJSONScheme)
		}
		if file == "" {
			return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
		}
		return kubectlget.NewCustomColumnsPrinterFromSpec(file, unstructured.UnstructuredJSONScheme, o.noHeaders)
	}
	return o.flags.ToPrinter()
}

// print prints objects of kind k with p: a table for table printers, a
// List (or the one object) otherwise.
func (o *output) print(w io.Writer, p printers.ResourcePrinter, k kind, items []*unstructured.Unstructured, single bool) error {
	if f := o.format(); f == "" || f == "wide" {
		return p.PrintObj(table(k, items), w)
	}
	if single && len(items) == 1 {
		return p.PrintObj(items[0], w)
	}
	if f := o.format(); f == "name" || strings.HasPrefix(f, "custom-columns") {
		for i, u := range items {
			if i > 0 {
				if cc, ok := p.(*kubectlget.CustomColumnsPrinter); ok {
					cc.NoHeaders = true
				}
			}
			if err := p.PrintObj(u, w); err != nil {
				return err
			}
		}
		return nil
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}}
	for _, u := range items {
		list.Items = append(list.Items, *u)
	}
	return p.PrintObj(list, w)
}
