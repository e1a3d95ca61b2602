package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/api"
)

// kueuectl's verbs: create clusterqueue|localqueue|resourceflavor with
// its flags, stop|resume clusterqueue. Each builds or changes the object
// here and applies it through POST /v1/apply, so the server validates it
// as any apply and --dry-run=server shows what it would do.

// applyObjects posts objects to /v1/apply and prints what happened.
func applyObjects(cmd *cobra.Command, stdout io.Writer, dryRun string, verb string, objs ...any) error {
	switch dryRun {
	case "", "none", "server":
	default:
		return fmt.Errorf("--dry-run: want none or server, not %q", dryRun)
	}
	items := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		items = append(items, b)
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	path, suffix := "/v1/apply", ""
	if dryRun == "server" {
		path, suffix = path+"?dryRun=All", " (server dry run)"
	}
	var out struct {
		Applied []struct{ Kind, Name, Namespace, Action string } `json:"applied"`
	}
	if err := newClient(cmd).do("POST", path, "application/json", body, &out); err != nil {
		return err
	}
	for _, a := range out.Applied {
		k, _ := kindOf(a.Kind)
		action := verb
		if a.Action == "unchanged" {
			action = "unchanged"
		}
		fmt.Fprintf(stdout, "%s.%s/%s %s%s\n", strings.ToLower(a.Kind), k.Group, a.Name, action, suffix)
	}
	return nil
}

// quotaSpec parses kueuectl's "flavor:resource=quantity;resource=quantity,flavor:..."
func quotaSpec(flag, v string) (map[string][]api.ResourceQuota, []string, error) {
	out := map[string][]api.ResourceQuota{}
	var order []string
	if v == "" {
		return out, nil, nil
	}
	for _, part := range strings.Split(v, ",") {
		flavor, list, ok := strings.Cut(part, ":")
		if !ok || flavor == "" || list == "" {
			return nil, nil, fmt.Errorf("--%s: %q: want FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY]", flag, part)
		}
		if _, dup := out[flavor]; dup {
			return nil, nil, fmt.Errorf("--%s: flavor %q given twice", flag, flavor)
		}
		order = append(order, flavor)
		for _, kv := range strings.Split(list, ";") {
			name, qty, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				return nil, nil, fmt.Errorf("--%s: %q: want RESOURCE=QUANTITY", flag, kv)
			}
			q, err := resource.ParseQuantity(qty)
			if err != nil {
				return nil, nil, fmt.Errorf("--%s: %s: %w", flag, kv, err)
			}
			out[flavor] = append(out[flavor], api.ResourceQuota{Name: corev1.ResourceName(name), NominalQuota: q})
		}
	}
	return out, order, nil
}

func createCmd(stdout io.Writer) *cobra.Command {
	create := &cobra.Command{Use: "create", Short: "Create a ClusterQueue, LocalQueue or ResourceFlavor from flags, as kueuectl does"}

	var cq struct {
		cohort, strategy, nsSelector, reclaim, within, nominal, borrowing, lending, dryRun string
	}
	cqCmd := &cobra.Command{
		Use:     "clusterqueue NAME",
		Aliases: []string{"cq"},
		Short:   "Create a ClusterQueue",
		Example: `  jqctl create clusterqueue my-cq --cohort all --nominal-quota "alpha:cpu=9;memory=36Gi,beta:cpu=18;memory=72Gi" \
    --borrowing-limit "alpha:cpu=1" --reclaim-within-cohort Any --preemption-within-cluster-queue LowerPriority`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nominal, order, err := quotaSpec("nominal-quota", cq.nominal)
			if err != nil {
				return err
			}
			borrowing, _, err := quotaSpec("borrowing-limit", cq.borrowing)
			if err != nil {
				return err
			}
			lending, _, err := quotaSpec("lending-limit", cq.lending)
			if err != nil {
				return err
			}
			for flag, limits := range map[string]map[string][]api.ResourceQuota{"borrowing-limit": borrowing, "lending-limit": lending} {
				for flavor, rs := range limits {
					for _, r := range rs {
						i := slices.IndexFunc(nominal[flavor], func(n api.ResourceQuota) bool { return n.Name == r.Name })
						if i < 0 {
							return fmt.Errorf("--%s: %s:%s has no --nominal-quota", flag, flavor, r.Name)
						}
						q := r.NominalQuota
						if flag == "borrowing-limit" {
							nominal[flavor][i].BorrowingLimit = &q
						} else {
							nominal[flavor][i].LendingLimit = &q
						}
					}
				}
			}
			obj := &api.ClusterQueue{TypeMeta: metav1.TypeMeta{APIVersion: api.KueueAPIVersion, Kind: api.KindClusterQueue},
				ObjectMeta: metav1.ObjectMeta{Name: args[0]}}
			obj.Spec.Cohort = cq.cohort
			obj.Spec.QueueingStrategy = api.QueueingStrategy(cq.strategy)
			sel := &metav1.LabelSelector{}
			if cq.nsSelector != "" {
				set, err := labels.ConvertSelectorToLabelsMap(cq.nsSelector)
				if err != nil {
					return fmt.Errorf("--namespace-selector: %w", err)
				}
				sel.MatchLabels = set
			}
			obj.Spec.NamespaceSelector = sel
			if cq.reclaim != "" || cq.within != "" {
				obj.Spec.Preemption = &api.ClusterQueuePreemption{ReclaimWithinCohort: api.PreemptionPolicy(cq.reclaim),
					WithinClusterQueue: api.PreemptionPolicy(cq.within)}
			}
			// Flavors with the same resources share a resource group, in
			// the order they were given.
			groups := map[string]int{}
			for _, f := range order {
				var names []string
				for _, r := range nominal[f] {
					names = append(names, string(r.Name))
				}
				key := strings.Join(names, ",")
				i, ok := groups[key]
				if !ok {
					i = len(obj.Spec.ResourceGroups)
					groups[key] = i
					var covered []corev1.ResourceName
					for _, n := range names {
						covered = append(covered, corev1.ResourceName(n))
					}
					obj.Spec.ResourceGroups = append(obj.Spec.ResourceGroups, api.ResourceGroup{CoveredResources: covered})
				}
				obj.Spec.ResourceGroups[i].Flavors = append(obj.Spec.ResourceGroups[i].Flavors, api.FlavorQuotas{Name: f, Resources: nominal[f]})
			}
			return applyObjects(cmd, stdout, cq.dryRun, "created", obj)
		},
	}
	f := cqCmd.Flags()
	f.StringVar(&cq.cohort, "cohort", "", "the cohort the ClusterQueue belongs to")
	f.StringVar(&cq.strategy, "queuing-strategy", "", "StrictFIFO or BestEffortFIFO (default BestEffortFIFO)")
	f.StringVar(&cq.nsSelector, "namespace-selector", "", "namespaces whose workloads it admits, KEY=VALUE[,KEY=VALUE] (default: every namespace)")
	f.StringVar(&cq.reclaim, "reclaim-within-cohort", "", "Never, LowerPriority or Any")
	f.StringVar(&cq.within, "preemption-within-cluster-queue", "", "Never, LowerPriority or LowerOrNewerEqualPriority")
	f.StringVar(&cq.nominal, "nominal-quota", "", `FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY][,FLAVOR:...], e.g. "alpha:cpu=9;memory=36Gi"`)
	f.StringVar(&cq.borrowing, "borrowing-limit", "", "as --nominal-quota")
	f.StringVar(&cq.lending, "lending-limit", "", "as --nominal-quota")
	addDryRun(cqCmd, &cq.dryRun)

	var lq struct{ namespace, clusterQueue, dryRun string }
	var ignoreUnknown bool
	lqCmd := &cobra.Command{
		Use:     "localqueue NAME",
		Aliases: []string{"lq"},
		Short:   "Create a LocalQueue",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lq.clusterQueue == "" {
				return fmt.Errorf("--clusterqueue is required")
			}
			c := newClient(cmd)
			ns := lq.namespace
			if ns == "" {
				ns = c.namespace
			}
			if ns == "" {
				ns = "default"
			}
			if !ignoreUnknown {
				k, _ := kindOf(api.KindClusterQueue)
				var probe map[string]any
				if err := c.do("GET", k.path("", lq.clusterQueue), "", nil, &probe); err != nil {
					return fmt.Errorf("ClusterQueue %q: %w (--ignore-unknown-cq creates the LocalQueue anyway)", lq.clusterQueue, err)
				}
			}
			obj := &api.LocalQueue{TypeMeta: metav1.TypeMeta{APIVersion: api.KueueAPIVersion, Kind: api.KindLocalQueue},
				ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: ns}, Spec: api.LocalQueueSpec{ClusterQueue: lq.clusterQueue}}
			return applyObjects(cmd, stdout, lq.dryRun, "created", obj)
		},
	}
	lqCmd.Flags().StringVarP(&lq.namespace, "namespace", "n", "", "its namespace (default: the context's, else default)")
	lqCmd.Flags().StringVarP(&lq.clusterQueue, "clusterqueue", "c", "", "the ClusterQueue it sends workloads to")
	lqCmd.Flags().BoolVarP(&ignoreUnknown, "ignore-unknown-cq", "i", false, "create it even if the ClusterQueue does not exist")
	addDryRun(lqCmd, &lq.dryRun)

	var rf struct{ labels, taints, tolerations, dryRun string }
	rfCmd := &cobra.Command{
		Use:     "resourceflavor NAME",
		Aliases: []string{"rf"},
		Short:   "Create a ResourceFlavor",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj := &api.ResourceFlavor{TypeMeta: metav1.TypeMeta{APIVersion: api.KueueAPIVersion, Kind: api.KindResourceFlavor},
				ObjectMeta: metav1.ObjectMeta{Name: args[0]}}
			if rf.labels != "" {
				set, err := labels.ConvertSelectorToLabelsMap(rf.labels)
				if err != nil {
					return fmt.Errorf("--node-labels: %w", err)
				}
				obj.Spec.NodeLabels = set
			}
			for _, t := range splitList(rf.taints) {
				taint, err := parseTaint(t)
				if err != nil {
					return fmt.Errorf("--node-taints: %w", err)
				}
				obj.Spec.NodeTaints = append(obj.Spec.NodeTaints, taint)
			}
			for _, t := range splitList(rf.tolerations) {
				tol, err := parseToleration(t)
				if err != nil {
					return fmt.Errorf("--tolerations: %w", err)
				}
				obj.Spec.Tolerations = append(obj.Spec.Tolerations, tol)
			}
			return applyObjects(cmd, stdout, rf.dryRun, "created", obj)
		},
	}
	rfCmd.Flags().StringVar(&rf.labels, "node-labels", "", "KEY=VALUE[,KEY=VALUE]")
	rfCmd.Flags().StringVar(&rf.taints, "node-taints", "", "KEY[=VALUE]:EFFECT[,...]")
	rfCmd.Flags().StringVar(&rf.tolerations, "tolerations", "", "KEY[=VALUE][:EFFECT][,...]")
	addDryRun(rfCmd, &rf.dryRun)

	create.AddCommand(cqCmd, lqCmd, rfCmd)
	return create
}

func addDryRun(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "dry-run", "none", `"server": validate and report without creating`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// parseTaint reads KEY[=VALUE]:EFFECT.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || effect == "" {
		return corev1.Taint{}, fmt.Errorf("%q: want KEY[=VALUE]:EFFECT", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

// parseToleration reads KEY[=VALUE][:EFFECT]; without a value the
// operator is Exists.
func parseToleration(s string) (corev1.Toleration, error) {
	kv, effect, _ := strings.Cut(s, ":")
	k, v, hasValue := strings.Cut(kv, "=")
	if k == "" {
		return corev1.Toleration{}, fmt.Errorf("%q: want KEY[=VALUE][:EFFECT]", s)
	}
	t := corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, v
	}
	return t, nil
}

// stopResumeCmd is kueuectl's stop or resume: it sets a ClusterQueue's
// or a LocalQueue's stopPolicy (stop: HoldAndDrain, or Hold with
// --keep-already-running; resume: None) on the object read back, and
// applies it.
func stopResumeCmd(stdout io.Writer, verb string) *cobra.Command {
	var keep bool
	var dryRun string
	cmd := &cobra.Command{
		Use:   verb,
		Short: map[string]string{"stop": "Stop a ClusterQueue, a LocalQueue or a Workload", "resume": "Resume a stopped ClusterQueue, LocalQueue or Workload"}[verb],
	}
	policy := func(keep bool) string {
		switch {
		case verb == "resume":
			return string(api.StopPolicyNone)
		case keep:
			return string(api.StopPolicyHold)
		}
		return string(api.StopPolicyHoldAndDrain)
	}
	cq := &cobra.Command{
		Use:     "clusterqueue NAME",
		Aliases: []string{"cq"},
		Short:   cmd.Short,
		Args:    cobra.ExactArgs(1),
		ValidArgsFunction: func(c *cobra.Command, args []string, tc string) ([]string, cobra.ShellCompDirective) {
			return completeObjects(c, append([]string{"cq"}, args...), tc)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			k, _ := kindOf(api.KindClusterQueue)
			u := &unstructured.Unstructured{}
			if err := newClient(cmd).do("GET", k.path("", args[0]), "", nil, u); err != nil {
				return err
			}
			if err := unstructured.SetNestedField(u.Object, policy(keep), "spec", "stopPolicy"); err != nil {
				return err
			}
			past := map[string]string{"stop": "stopped", "resume": "resumed"}[verb]
			return applyObjects(cmd, stdout, dryRun, past, u.Object)
		},
	}
	if verb == "stop" {
		cq.Flags().BoolVar(&keep, "keep-already-running", false, "keep the admitted workloads running (stopPolicy Hold instead of HoldAndDrain)")
	}
	addDryRun(cq, &dryRun)
	var lqKeep bool
	var lqDryRun, lqNamespace string
	lq := &cobra.Command{
		Use:     "localqueue NAME",
		Aliases: []string{"lq"},
		Short: map[string]string{"stop": "Stop a LocalQueue (stopPolicy HoldAndDrain: its admitted workloads are evicted, LocalQueueStopped)",
			"resume": "Resume a stopped LocalQueue (stopPolicy None)"}[verb],
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(c *cobra.Command, args []string, tc string) ([]string, cobra.ShellCompDirective) {
			return completeObjects(c, append([]string{"lq"}, args...), tc)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			ns, name := lqNamespace, args[0]
			if a, b, ok := strings.Cut(name, "/"); ok {
				ns, name = a, b
			}
			if ns == "" {
				ns = c.namespace
			}
			if ns == "" {
				return fmt.Errorf("localqueue %q: give its namespace with -n, or as NAMESPACE/NAME", name)
			}
			k, _ := kindOf(api.KindLocalQueue)
			u := &unstructured.Unstructured{}
			if err := c.do("GET", k.path(ns, name), "", nil, u); err != nil {
				return err
			}
			if err := unstructured.SetNestedField(u.Object, policy(lqKeep), "spec", "stopPolicy"); err != nil {
				return err
			}
			past := map[string]string{"stop": "stopped", "resume": "resumed"}[verb]
			return applyObjects(cmd, stdout, lqDryRun, past, u.Object)
		},
	}
	if verb == "stop" {
		lq.Flags().BoolVar(&lqKeep, "keep-already-running", false, "keep the admitted workloads running (stopPolicy Hold instead of HoldAndDrain)")
	}
	lq.Flags().StringVarP(&lqNamespace, "namespace", "n", "", "the LocalQueue's namespace (default: the context's)")
	addDryRun(lq, &lqDryRun)
	var namespace string
	wl := &cobra.Command{
		Use:     "workload NAME",
		Aliases: []string{"wl"},
		Short:   map[string]string{"stop": "Deactivate a workload (spec.active false): out of its queue, evicted if admitted", "resume": "Reactivate a workload (spec.active true): back in its queue"}[verb],
		Args:    cobra.ExactArgs(1),
		ValidArgsFunction: func(c *cobra.Command, args []string, tc string) ([]string, cobra.ShellCompDirective) {
			return completeObjects(c, append([]string{"wl"}, args...), tc)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(cmd)
			ns, name := namespace, args[0]
			if a, b, ok := strings.Cut(name, "/"); ok {
				ns, name = a, b
			}
			if ns == "" {
				ns = c.namespace
			}
			if ns == "" {
				return fmt.Errorf("workload %q: give its namespace with -n, or as NAMESPACE/NAME", name)
			}
			body := fmt.Appendf(nil, `{"active":%t}`, verb == "resume")
			if err := c.do("POST", "/v1/workloads/"+url.PathEscape(ns)+"/"+url.PathEscape(name)+"/active", "application/json", body, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "workload.kueue.x-k8s.io/%s %s\n", name, map[string]string{"stop": "stopped", "resume": "resumed"}[verb])
			return nil
		},
	}
	wl.Flags().StringVarP(&namespace, "namespace", "n", "", "the workload's namespace (default: the context's)")
	cmd.AddCommand(cq, lq, wl)
	return cmd
}
