package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func baseRF(mut ...func(*ResourceFlavor)) Object {
	rf := &ResourceFlavor{ObjectMeta: objMeta("rf"), Spec: ResourceFlavorSpec{
		NodeLabels:  map[string]string{"cloud.example.com/pool": "spot"},
		NodeTaints:  []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	}}
	Default(rf)
	for _, m := range mut {
		m(rf)
	}
	return rf
}

func cpuMem(cpu, mem string) []ResourceQuota {
	return []ResourceQuota{{Name: "cpu", NominalQuota: q(cpu)}, {Name: "memory", NominalQuota: q(mem)}}
}

func baseCQ(mut ...func(*ClusterQueue)) Object {
	cq := &ClusterQueue{ObjectMeta: objMeta("cq-a"), Spec: ClusterQueueSpec{
		Cohort:            "co",
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []ResourceGroup{{
			CoveredResources: []corev1.ResourceName{"cpu", "memory"},
			Flavors:          []FlavorQuotas{{Name: "f1", Resources: cpuMem("4", "8Gi")}},
		}},
	}}
	Default(cq)
	for _, m := range mut {
		m(cq)
	}
	return cq
}

// manyGroups builds n resource groups with distinct resources and flavors.
func manyGroups(n int) []ResourceGroup {
	var out []ResourceGroup
	for i := 0; i < n; i++ {
		r := corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))
		out = append(out, ResourceGroup{
			CoveredResources: []corev1.ResourceName{r},
			Flavors:          []FlavorQuotas{{Name: fmt.Sprintf("f%d", i), Resources: []ResourceQuota{{Name: r, NominalQuota: q("1")}}}},
		})
	}
	return out
}

// wideGroup covers n resources with one flavor listing them all.
func wideGroup(n int) ResourceGroup {
	rg := ResourceGroup{Flavors: []FlavorQuotas{{Name: "f1"}}}
	for i := 0; i < n; i++ {
		r := corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))
		rg.CoveredResources = append(rg.CoveredResources, r)
		rg.Flavors[0].Resources = append(rg.Flavors[0].Resources, ResourceQuota{Name: r, NominalQuota: q("1")})
	}
	return rg
}

func baseLQ(mut ...func(*LocalQueue)) Object {
	lq := &LocalQueue{ObjectMeta: nsMeta("team-a", "lq"), Spec: LocalQueueSpec{ClusterQueue: "cq-a"}}
	Default(lq)
	for _, m := range mut {
		m(lq)
	}
	return lq
}

func baseWPC(mut ...func(*WorkloadPriorityClass)) Object {
	w := &WorkloadPriorityClass{ObjectMeta: objMeta("high"), Value: 1000}
	Default(w)
	for _, m := range mut {
		m(w)
	}
	return w
}

func basePC(mut ...func(*PriorityClass)) Object {
	pc := &PriorityClass{ObjectMeta: objMeta("pc"), Value: 100}
	Default(pc)
	for _, m := range mut {
		m(pc)
	}
	return pc
}

func baseWL(mut ...func(*Workload)) Object {
	wl := &Workload{ObjectMeta: nsMeta("team-a", "wl"), Spec: WorkloadSpec{
		QueueName: "lq",
		PodSets:   []PodSet{{Name: "main", Count: 3, Template: podTemplate()}},
	}}
	Default(wl)
	for _, m := range mut {
		m(wl)
	}
	return wl
}

func baseConfig(mut ...func(*Configuration)) Object {
	c := &Configuration{WaitForPodsReady: &WaitForPodsReady{Enable: true}}
	Default(c)
	for _, m := range mut {
		m(c)
	}
	return c
}

func baseJob(mut ...func(*Job)) *Job {
	j := &Job{ObjectMeta: nsMeta("team-a", "job"), Spec: jobSpec(3, nil)}
	j.Labels = map[string]string{QueueNameLabel: "lq"}
	Default(j)
	for _, m := range mut {
		m(j)
	}
	return j
}

func TestValidateAcceptsValidObjects(t *testing.T) {
	for _, obj := range []Object{
		baseRF(), baseCQ(), baseLQ(), baseWPC(), basePC(), baseWL(), baseConfig(), baseJob(),
		baseWPC(func(w *WorkloadPriorityClass) { w.Value = -2147483648 }),
		basePC(func(p *PriorityClass) { p.Value = 1000000000 }),
		basePC(func(p *PriorityClass) { p.Name, p.Value = "system-node-critical", 2000001000 }),
		baseWL(func(w *Workload) { w.Spec.QueueName = "" }),
		baseWL(func(w *Workload) { w.Name, w.GenerateName = "", "wl-" }),
		baseWL(func(w *Workload) { w.Spec.PodSets[0].MinCount = ptr[int32](3) }),
		baseWL(func(w *Workload) { w.Spec.PriorityClassName, w.Spec.Priority = "high", ptr[int32](5) }),
		baseJob(func(j *Job) { j.Name, j.GenerateName = "", "sample-job-" }),
		baseJob(func(j *Job) { j.Spec.Parallelism = ptr[int32](0) }),
		baseCQ(func(c *ClusterQueue) { c.Spec.ResourceGroups = manyGroups(16) }),
		baseCQ(func(c *ClusterQueue) { c.Spec.NamespaceSelector = nil }),
		baseCQ(func(c *ClusterQueue) {
			c.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = qp("4")
			c.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit = qp("0")
		}),
		&Configuration{},
	} {
		if err := Validate(obj); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", ObjectRef(obj), err)
		}
	}
}

type validateCase struct {
	name string
	obj  Object
	want []FieldError
}

func runValidateCases(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diffErrors(t, tc.want, Validate(tc.obj))
		})
	}
}

func TestValidateNames(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"resourceflavor name not a DNS subdomain", baseRF(func(o *ResourceFlavor) { o.Name = "Bad_Name" }),
			[]FieldError{{"ResourceFlavor/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"clusterqueue name required", baseCQ(func(o *ClusterQueue) { o.Name = "" }),
			[]FieldError{{"ClusterQueue/", "metadata.name", "Required value"}}},
		{"clusterqueue name not a DNS subdomain", baseCQ(func(o *ClusterQueue) { o.Name = "Bad_Name" }),
			[]FieldError{{"ClusterQueue/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"clusterqueue generateName refused", baseCQ(func(o *ClusterQueue) { o.Name, o.GenerateName = "", "cq-" }),
			[]FieldError{
				{"ClusterQueue/cq-", "metadata.generateName", "Forbidden: not supported for this kind; set metadata.name"},
				{"ClusterQueue/cq-", "metadata.name", "Required value"},
			}},
		{"cluster-scoped kind with a namespace", baseCQ(func(o *ClusterQueue) { o.Namespace = "default" }),
			[]FieldError{{"ClusterQueue/default/cq-a", "metadata.namespace", "Forbidden: not allowed on this type"}}},
		{"workloadpriorityclass name", baseWPC(func(o *WorkloadPriorityClass) { o.Name = "Bad_Name" }),
			[]FieldError{{"WorkloadPriorityClass/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"workloadpriorityclass with a namespace", baseWPC(func(o *WorkloadPriorityClass) { o.Namespace = "ns" }),
			[]FieldError{{"WorkloadPriorityClass/ns/high", "metadata.namespace", "Forbidden: not allowed on this type"}}},
		{"priorityclass name", basePC(func(o *PriorityClass) { o.Name = "Bad_Name" }),
			[]FieldError{{"PriorityClass/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"localqueue name", baseLQ(func(o *LocalQueue) { o.Name = "Bad_Name" }),
			[]FieldError{{"LocalQueue/team-a/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"localqueue namespace required", baseLQ(func(o *LocalQueue) { o.Namespace = "" }),
			[]FieldError{{"LocalQueue//lq", "metadata.namespace", "Required value"}}},
		{"localqueue namespace not a DNS label", baseLQ(func(o *LocalQueue) { o.Namespace = "Bad_Name" }),
			[]FieldError{{"LocalQueue/Bad_Name/lq", "metadata.namespace", `Invalid value: "Bad_Name": ` + dnsLabelMsg}}},
		{"workload name and generateName missing", baseWL(func(o *Workload) { o.Name = "" }),
			[]FieldError{{"Workload/team-a/", "metadata.name", "Required value"}}},
		{"workload name", baseWL(func(o *Workload) { o.Name = "Bad_Name" }),
			[]FieldError{{"Workload/team-a/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"workload namespace required", baseWL(func(o *Workload) { o.Namespace = "" }),
			[]FieldError{{"Workload//wl", "metadata.namespace", "Required value"}}},
		{"job name", baseJob(func(o *Job) { o.Name = "Bad_Name" }),
			[]FieldError{{"Job/team-a/Bad_Name", "metadata.name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"job generateName", baseJob(func(o *Job) { o.Name, o.GenerateName = "", "Bad_" }),
			[]FieldError{{"Job/team-a/Bad_", "metadata.generateName", `Invalid value: "Bad_": ` + dnsSubdomainMsg}}},
		{"job namespace required", baseJob(func(o *Job) { o.Namespace = "" }),
			[]FieldError{{"Job//job", "metadata.namespace", "Required value"}}},
		{"metadata label key", baseLQ(func(o *LocalQueue) { o.Labels = map[string]string{"bad key!": "v"} }),
			[]FieldError{{"LocalQueue/team-a/lq", "metadata.labels[bad key!]", `Invalid value: "bad key!": ` + qualifiedMsg}}},
		{"metadata annotation key", baseLQ(func(o *LocalQueue) { o.Annotations = map[string]string{"bad key!": "v"} }),
			[]FieldError{{"LocalQueue/team-a/lq", "metadata.annotations[bad key!]", `Invalid value: "bad key!": ` + qualifiedMsg}}},
	})
}

func TestValidateResourceFlavor(t *testing.T) {
	nine := map[string]string{}
	for i := 0; i < 9; i++ {
		nine[fmt.Sprintf("k%d", i)] = "v"
	}
	var nineTaints []corev1.Taint
	var nineTols []corev1.Toleration
	for i := 0; i < 9; i++ {
		nineTaints = append(nineTaints, corev1.Taint{Key: fmt.Sprintf("k%d", i), Effect: corev1.TaintEffectNoSchedule})
		nineTols = append(nineTols, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
	}
	const rf = "ResourceFlavor/rf"
	runValidateCases(t, []validateCase{
		{"nodeLabels key", baseRF(func(o *ResourceFlavor) { o.Spec.NodeLabels = map[string]string{"bad key!": "v"} }),
			[]FieldError{{rf, "spec.nodeLabels[bad key!]", `Invalid value: "bad key!": ` + qualifiedMsg}}},
		{"nodeLabels value", baseRF(func(o *ResourceFlavor) { o.Spec.NodeLabels = map[string]string{"k": "bad value!"} }),
			[]FieldError{{rf, "spec.nodeLabels[k]", `Invalid value: "bad value!": ` + labelValueMsg}}},
		{"at most 8 nodeLabels", baseRF(func(o *ResourceFlavor) { o.Spec.NodeLabels = nine }),
			[]FieldError{{rf, "spec.nodeLabels", "Too many: 9: must have at most 8 items"}}},
		{"taint key", baseRF(func(o *ResourceFlavor) { o.Spec.NodeTaints[0].Key = "bad key!" }),
			[]FieldError{{rf, "spec.nodeTaints[0].key", `Invalid value: "bad key!": ` + qualifiedMsg}}},
		{"taint value", baseRF(func(o *ResourceFlavor) { o.Spec.NodeTaints[0].Value = "bad value!" }),
			[]FieldError{{rf, "spec.nodeTaints[0].value", `Invalid value: "bad value!": ` + labelValueMsg}}},
		{"taint effect required", baseRF(func(o *ResourceFlavor) { o.Spec.NodeTaints[0].Effect = "" }),
			[]FieldError{{rf, "spec.nodeTaints[0].effect", "Required value"}}},
		{"taint effect value", baseRF(func(o *ResourceFlavor) { o.Spec.NodeTaints[0].Effect = "Sometimes" }),
			[]FieldError{{rf, "spec.nodeTaints[0].effect", `Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}}},
		{"taints unique by key and effect", baseRF(func(o *ResourceFlavor) {
			o.Spec.NodeTaints = append(o.Spec.NodeTaints, corev1.Taint{Key: "spot", Value: "other", Effect: corev1.TaintEffectNoSchedule})
		}), []FieldError{{rf, "spec.nodeTaints[1]", `Duplicate value: "spot:NoSchedule": taints must be unique by key and effect pair`}}},
		{"at most 8 taints", baseRF(func(o *ResourceFlavor) { o.Spec.NodeTaints = nineTaints }),
			[]FieldError{{rf, "spec.nodeTaints", "Too many: 9: must have at most 8 items"}}},
		{"toleration without key needs Exists", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations[0].Key = "" }),
			[]FieldError{{rf, "spec.tolerations[0].operator", `Invalid value: "Equal": operator must be Exists when ` + "`key`" + ` is empty, which means "match all values and all keys"`}}},
		{"toleration Exists with value", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations[0].Operator = corev1.TolerationOpExists }),
			[]FieldError{{rf, "spec.tolerations[0].value", `Invalid value: "true": value must be empty when ` + "`operator`" + ` is 'Exists'`}}},
		{"toleration operator", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations[0].Operator = "In" }),
			[]FieldError{{rf, "spec.tolerations[0].operator", `Unsupported value: "In": supported values: "Equal", "Exists"`}}},
		{"toleration seconds need NoExecute", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations[0].TolerationSeconds = ptr[int64](10) }),
			[]FieldError{{rf, "spec.tolerations[0].effect", `Invalid value: "NoSchedule": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`}}},
		{"toleration effect", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations[0].Effect = "Never" }),
			[]FieldError{{rf, "spec.tolerations[0].effect", `Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}}},
		{"at most 8 tolerations", baseRF(func(o *ResourceFlavor) { o.Spec.Tolerations = nineTols }),
			[]FieldError{{rf, "spec.tolerations", "Too many: 9: must have at most 8 items"}}},
	})
}

func TestValidateClusterQueue(t *testing.T) {
	const cq = "ClusterQueue/cq-a"
	const res0 = "spec.resourceGroups[0].flavors[0].resources[0]"
	rg0 := func(f func(*ResourceGroup)) func(*ClusterQueue) {
		return func(c *ClusterQueue) { f(&c.Spec.ResourceGroups[0]) }
	}
	quota0 := func(f func(*ResourceQuota)) func(*ClusterQueue) {
		return func(c *ClusterQueue) { f(&c.Spec.ResourceGroups[0].Flavors[0].Resources[0]) }
	}
	noCohort := func(c *ClusterQueue) { c.Spec.Cohort = "" }
	runValidateCases(t, []validateCase{
		{"cohort is a DNS subdomain", baseCQ(func(c *ClusterQueue) { c.Spec.Cohort = "Bad_Name" }),
			[]FieldError{{cq, "spec.cohort", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"queueingStrategy enum", baseCQ(func(c *ClusterQueue) { c.Spec.QueueingStrategy = "LIFO" }),
			[]FieldError{{cq, "spec.queueingStrategy", `Unsupported value: "LIFO": supported values: "StrictFIFO", "BestEffortFIFO"`}}},
		{"at most 16 resourceGroups", baseCQ(func(c *ClusterQueue) { c.Spec.ResourceGroups = manyGroups(17) }),
			[]FieldError{{cq, "spec.resourceGroups", "Too many: 17: must have at most 16 items"}}},
		{"coveredResources required", baseCQ(rg0(func(rg *ResourceGroup) {
			rg.CoveredResources = nil
			rg.Flavors[0].Resources = nil
		})), []FieldError{{cq, "spec.resourceGroups[0].coveredResources", "Required value"}}},
		{"at most 16 coveredResources", baseCQ(func(c *ClusterQueue) { c.Spec.ResourceGroups[0] = wideGroup(17) }),
			[]FieldError{{cq, "spec.resourceGroups[0].coveredResources", "Too many: 17: must have at most 16 items"}}},
		{"coveredResources are qualified names", baseCQ(rg0(func(rg *ResourceGroup) {
			rg.CoveredResources[0] = "bad key!"
			rg.Flavors[0].Resources[0].Name = "bad key!"
		})), []FieldError{{cq, "spec.resourceGroups[0].coveredResources[0]", `Invalid value: "bad key!": ` + qualifiedMsg}}},
		{"flavors required", baseCQ(rg0(func(rg *ResourceGroup) { rg.Flavors = nil })),
			[]FieldError{{cq, "spec.resourceGroups[0].flavors", "Required value"}}},
		{"at most 16 flavors", baseCQ(rg0(func(rg *ResourceGroup) {
			rg.Flavors = nil
			for i := 0; i < 17; i++ {
				rg.Flavors = append(rg.Flavors, FlavorQuotas{Name: fmt.Sprintf("f%d", i), Resources: cpuMem("1", "1")})
			}
		})), []FieldError{{cq, "spec.resourceGroups[0].flavors", "Too many: 17: must have at most 16 items"}}},
		{"flavor name required", baseCQ(rg0(func(rg *ResourceGroup) { rg.Flavors[0].Name = "" })),
			[]FieldError{{cq, "spec.resourceGroups[0].flavors[0].name", "Required value"}}},
		{"flavor name is a DNS subdomain", baseCQ(rg0(func(rg *ResourceGroup) { rg.Flavors[0].Name = "Bad_Name" })),
			[]FieldError{{cq, "spec.resourceGroups[0].flavors[0].name", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"flavor resources same length as coveredResources", baseCQ(rg0(func(rg *ResourceGroup) { rg.Flavors[0].Resources = rg.Flavors[0].Resources[:1] })),
			[]FieldError{{cq, "spec.resourceGroups[0].flavors[0].resources", "Invalid value: must have the same number of resources as the coveredResources"}}},
		{"flavor resources in coveredResources order", baseCQ(rg0(func(rg *ResourceGroup) {
			r := rg.Flavors[0].Resources
			r[0], r[1] = r[1], r[0]
		})), []FieldError{
			{cq, "spec.resourceGroups[0].flavors[0].resources[0].name", `Invalid value: "memory": must match the name in coveredResources`},
			{cq, "spec.resourceGroups[0].flavors[0].resources[1].name", `Invalid value: "cpu": must match the name in coveredResources`},
		}},
		{"a resource in only one group", baseCQ(func(c *ClusterQueue) {
			c.Spec.ResourceGroups = append(c.Spec.ResourceGroups, ResourceGroup{
				CoveredResources: []corev1.ResourceName{"cpu"},
				Flavors:          []FlavorQuotas{{Name: "f2", Resources: []ResourceQuota{{Name: "cpu", NominalQuota: q("1")}}}},
			})
		}), []FieldError{{cq, "spec.resourceGroups[1].coveredResources[0]", `Duplicate value: "cpu"`}}},
		{"a flavor at most once per clusterqueue", baseCQ(func(c *ClusterQueue) {
			c.Spec.ResourceGroups = append(c.Spec.ResourceGroups, ResourceGroup{
				CoveredResources: []corev1.ResourceName{"example.com/gpu"},
				Flavors:          []FlavorQuotas{{Name: "f1", Resources: []ResourceQuota{{Name: "example.com/gpu", NominalQuota: q("1")}}}},
			})
		}), []FieldError{{cq, "spec.resourceGroups[1].flavors[0].name", `Duplicate value: "f1"`}}},
		{"nominalQuota non-negative", baseCQ(quota0(func(r *ResourceQuota) { r.NominalQuota = q("-1") })),
			[]FieldError{{cq, res0 + ".nominalQuota", `Invalid value: "-1": must be greater than or equal to 0`}}},
		{"borrowingLimit non-negative", baseCQ(quota0(func(r *ResourceQuota) { r.BorrowingLimit = qp("-500m") })),
			[]FieldError{{cq, res0 + ".borrowingLimit", `Invalid value: "-500m": must be greater than or equal to 0`}}},
		{"lendingLimit non-negative", baseCQ(quota0(func(r *ResourceQuota) { r.LendingLimit = qp("-1") })),
			[]FieldError{{cq, res0 + ".lendingLimit", `Invalid value: "-1": must be greater than or equal to 0`}}},
		{"borrowingLimit needs a cohort", baseCQ(noCohort, quota0(func(r *ResourceQuota) { r.BorrowingLimit = qp("2") })),
			[]FieldError{{cq, res0 + ".borrowingLimit", `Invalid value: "2": must be nil when cohort is empty`}}},
		{"lendingLimit needs a cohort", baseCQ(noCohort, quota0(func(r *ResourceQuota) { r.LendingLimit = qp("2") })),
			[]FieldError{{cq, res0 + ".lendingLimit", `Invalid value: "2": must be nil when cohort is empty`}}},
		{"lendingLimit at most nominalQuota", baseCQ(quota0(func(r *ResourceQuota) { r.LendingLimit = qp("5") })),
			[]FieldError{{cq, res0 + ".lendingLimit", `Invalid value: "5": must be less than or equal to the nominalQuota`}}},
		{"preemption withinClusterQueue enum", baseCQ(func(c *ClusterQueue) { c.Spec.Preemption.WithinClusterQueue = PreemptionAny }),
			[]FieldError{{cq, "spec.preemption.withinClusterQueue", `Unsupported value: "Any": supported values: "Never", "LowerPriority", "LowerOrNewerEqualPriority"`}}},
		{"preemption reclaimWithinCohort enum", baseCQ(func(c *ClusterQueue) { c.Spec.Preemption.ReclaimWithinCohort = PreemptionLowerOrNewerEqualPriority }),
			[]FieldError{{cq, "spec.preemption.reclaimWithinCohort", `Unsupported value: "LowerOrNewerEqualPriority": supported values: "Never", "LowerPriority", "Any"`}}},
		{"preemption borrowWithinCohort policy enum", baseCQ(func(c *ClusterQueue) {
			c.Spec.Preemption.ReclaimWithinCohort = PreemptionAny
			c.Spec.Preemption.BorrowWithinCohort.Policy = "Any"
		}), []FieldError{{cq, "spec.preemption.borrowWithinCohort.policy", `Unsupported value: "Any": supported values: "Never", "LowerPriority"`}}},
		{"reclaimWithinCohort Never forbids borrowWithinCohort", baseCQ(func(c *ClusterQueue) {
			c.Spec.Preemption.BorrowWithinCohort.Policy = BorrowWithinCohortLowerPriority
		}), []FieldError{{cq, "spec.preemption", "Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"}}},
		{"flavorFungibility whenCanBorrow enum", baseCQ(func(c *ClusterQueue) { c.Spec.FlavorFungibility.WhenCanBorrow = FungibilityPreempt }),
			[]FieldError{{cq, "spec.flavorFungibility.whenCanBorrow", `Unsupported value: "Preempt": supported values: "Borrow", "TryNextFlavor"`}}},
		{"flavorFungibility whenCanPreempt enum", baseCQ(func(c *ClusterQueue) { c.Spec.FlavorFungibility.WhenCanPreempt = FungibilityBorrow }),
			[]FieldError{{cq, "spec.flavorFungibility.whenCanPreempt", `Unsupported value: "Borrow": supported values: "Preempt", "TryNextFlavor"`}}},
		{"stopPolicy enum", baseCQ(func(c *ClusterQueue) { c.Spec.StopPolicy = ptr(StopPolicy("Pause")) }),
			[]FieldError{{cq, "spec.stopPolicy", `Unsupported value: "Pause": supported values: "None", "Hold", "HoldAndDrain"`}}},
		{"namespaceSelector must convert", baseCQ(func(c *ClusterQueue) {
			c.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		}), []FieldError{{cq, "spec.namespaceSelector.matchExpressions[0].operator", `Invalid value: "Near": not a valid selector operator`}}},
		{"namespaceSelector In needs values", baseCQ(func(c *ClusterQueue) {
			c.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
		}), []FieldError{{cq, "spec.namespaceSelector.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"}}},
		// Accepted as in Kueue; the queue stays inactive (no AdmissionCheck objects).
		{"admissionChecks accepted", baseCQ(func(c *ClusterQueue) { c.Spec.AdmissionChecks = []string{"prov"} }), nil},
	})
}

func TestValidateLocalQueue(t *testing.T) {
	const lq = "LocalQueue/team-a/lq"
	runValidateCases(t, []validateCase{
		{"clusterQueue required", baseLQ(func(o *LocalQueue) { o.Spec.ClusterQueue = "" }),
			[]FieldError{{lq, "spec.clusterQueue", "Required value"}}},
		{"clusterQueue is a DNS subdomain", baseLQ(func(o *LocalQueue) { o.Spec.ClusterQueue = "Bad_Name" }),
			[]FieldError{{lq, "spec.clusterQueue", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
	})
}

func TestValidatePriorityClass(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"user value at most 1000000000", basePC(func(p *PriorityClass) { p.Value = 1000000001 }),
			[]FieldError{{"PriorityClass/pc", "value", "Forbidden: maximum allowed value of a user defined priority is 1000000000"}}},
		{"system- prefix reserved", basePC(func(p *PriorityClass) { p.Name = "system-mine" }),
			[]FieldError{{"PriorityClass/system-mine", "metadata.name", "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"}}},
		{"system class keeps its value", basePC(func(p *PriorityClass) { p.Name = "system-cluster-critical" }),
			[]FieldError{{"PriorityClass/system-cluster-critical", "metadata.name", "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-cluster-critical PriorityClass must be 2000000000"}}},
		{"preemptionPolicy enum", basePC(func(p *PriorityClass) { p.PreemptionPolicy = ptr(corev1.PreemptionPolicy("Always")) }),
			[]FieldError{{"PriorityClass/pc", "preemptionPolicy", `Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"`}}},
	})
}

func TestValidateWorkload(t *testing.T) {
	const wl = "Workload/team-a/wl"
	ps0 := func(f func(*PodSet)) func(*Workload) {
		return func(w *Workload) { f(&w.Spec.PodSets[0]) }
	}
	nine := make([]PodSet, 9)
	for i := range nine {
		nine[i] = PodSet{Name: fmt.Sprintf("ps%d", i), Count: 1, Template: podTemplate()}
	}
	runValidateCases(t, []validateCase{
		{"podSets required", baseWL(func(w *Workload) { w.Spec.PodSets = nil }),
			[]FieldError{{wl, "spec.podSets", "Required value"}}},
		{"at most 8 podSets", baseWL(func(w *Workload) { w.Spec.PodSets = nine }),
			[]FieldError{{wl, "spec.podSets", "Too many: 9: must have at most 8 items"}}},
		{"podSet name is a DNS label", baseWL(ps0(func(p *PodSet) { p.Name = "Bad_Name" })),
			[]FieldError{{wl, "spec.podSets[0].name", `Invalid value: "Bad_Name": ` + dnsLabelMsg}}},
		{"podSet name required with several podSets", baseWL(func(w *Workload) {
			w.Spec.PodSets = append(w.Spec.PodSets, PodSet{Count: 1, Template: podTemplate()})
		}), []FieldError{{wl, "spec.podSets[1].name", "Required value"}}},
		{"podSet names unique", baseWL(func(w *Workload) {
			w.Spec.PodSets = append(w.Spec.PodSets, PodSet{Name: "main", Count: 1, Template: podTemplate()})
		}), []FieldError{{wl, "spec.podSets[1].name", `Duplicate value: "main"`}}},
		{"count at least 1", baseWL(ps0(func(p *PodSet) { p.Count = 0 })),
			[]FieldError{{wl, "spec.podSets[0].count", "Invalid value: 0: must be greater than or equal to 1"}}},
		{"minCount not negative", baseWL(ps0(func(p *PodSet) { p.MinCount = ptr[int32](-1) })),
			[]FieldError{{wl, "spec.podSets[0].minCount", "Forbidden: -1 should be positive and less or equal to 3"}}},
		{"minCount may be 0", baseWL(ps0(func(p *PodSet) { p.MinCount = ptr[int32](0) })), nil},
		{"minCount at most count", baseWL(ps0(func(p *PodSet) { p.MinCount = ptr[int32](4) })),
			[]FieldError{{wl, "spec.podSets[0].minCount", "Forbidden: 4 should be positive and less or equal to 3"}}},
		{"minCount on one podSet only", baseWL(func(w *Workload) {
			w.Spec.PodSets[0].MinCount = ptr[int32](1)
			w.Spec.PodSets = append(w.Spec.PodSets, PodSet{Name: "workers", Count: 2, MinCount: ptr[int32](1), Template: podTemplate()})
		}), []FieldError{{wl, "spec.podSets", "Invalid value: 2: at most one podSet can use minCount"}}},
		{"containers field required", baseWL(ps0(func(p *PodSet) { p.Template.Spec.Containers = nil })),
			[]FieldError{{wl, "spec.podSets[0].template.spec.containers", "Required value"}}},
		// The CRD schema has no minItems on it (Kueue accepts the list empty).
		{"containers may be empty", baseWL(ps0(func(p *PodSet) { p.Template.Spec.Containers = []corev1.Container{} })), nil},
		{"container name required", baseWL(ps0(func(p *PodSet) { p.Template.Spec.Containers[0].Name = "" })),
			[]FieldError{{wl, "spec.podSets[0].template.spec.containers[0].name", "Required value"}}},
		{"no pods request", baseWL(ps0(func(p *PodSet) {
			p.Template.Spec.Containers[0].Resources.Requests["pods"] = q("1")
		})), []FieldError{{wl, "spec.podSets[0].template.spec.containers[0].resources.requests[pods]", `Invalid value: "pods": the key is reserved for internal kueue use`}}},
		{"pods limit accepted", baseWL(ps0(func(p *PodSet) {
			p.Template.Spec.InitContainers = []corev1.Container{container(nil, corev1.ResourceList{"pods": q("1")})}
		})), nil},
		{"no pods request in an init container", baseWL(ps0(func(p *PodSet) {
			p.Template.Spec.InitContainers = []corev1.Container{container(corev1.ResourceList{"pods": q("1")}, nil)}
		})), []FieldError{{wl, "spec.podSets[0].template.spec.initContainers[0].resources.requests[pods]", `Invalid value: "pods": the key is reserved for internal kueue use`}}},
		{"requests non-negative", baseWL(ps0(func(p *PodSet) {
			p.Template.Spec.Containers[0].Resources.Requests["memory"] = q("-1Gi")
		})), []FieldError{{wl, "spec.podSets[0].template.spec.containers[0].resources.requests[memory]", `Invalid value: "-1Gi": must be greater than or equal to 0`}}},
		{"overhead non-negative", baseWL(ps0(func(p *PodSet) {
			p.Template.Spec.Overhead = corev1.ResourceList{"cpu": q("-1")}
		})), []FieldError{{wl, "spec.podSets[0].template.spec.overhead[cpu]", `Invalid value: "-1": must be greater than or equal to 0`}}},
		{"priorityClassName needs priority", baseWL(func(w *Workload) { w.Spec.PriorityClassName = "high" }),
			[]FieldError{{wl, "spec.priority", "Required value: priority should not be nil when priorityClassName is set"}}},
		{"priorityClassName is a DNS subdomain", baseWL(func(w *Workload) {
			w.Spec.PriorityClassName, w.Spec.Priority = "Bad_Name", ptr[int32](1)
		}), []FieldError{{wl, "spec.priorityClassName", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"priorityClassSource enum", baseWL(func(w *Workload) { w.Spec.PriorityClassSource = "elsewhere" }),
			[]FieldError{{wl, "spec.priorityClassSource", `Unsupported value: "elsewhere": supported values: "", "kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass"`}}},
		{"queueName is a DNS subdomain", baseWL(func(w *Workload) { w.Spec.QueueName = "Bad_Name" }),
			[]FieldError{{wl, "spec.queueName", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
	})
}

func TestValidateConfiguration(t *testing.T) {
	rs := func(f func(*RequeuingStrategy)) func(*Configuration) {
		return func(c *Configuration) { f(c.WaitForPodsReady.RequeuingStrategy) }
	}
	const p = "waitForPodsReady.requeuingStrategy."
	runValidateCases(t, []validateCase{
		// Kueue v0.6.3 validateWaitForPodsReady checks no timeout.
		{"timeout not checked", baseConfig(func(c *Configuration) { c.WaitForPodsReady.Timeout = &metav1.Duration{} }), nil},
		{"timestamp enum", baseConfig(rs(func(r *RequeuingStrategy) { r.Timestamp = ptr(RequeuingTimestamp("Admission")) })),
			[]FieldError{{"Configuration", p + "timestamp", `Unsupported value: "Admission": supported values: "Creation", "Eviction"`}}},
		{"backoffLimitCount non-negative", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffLimitCount = ptr[int32](-1) })),
			[]FieldError{{"Configuration", p + "backoffLimitCount", "Invalid value: -1: must be greater than or equal to 0"}}},
		{"backoffBaseSeconds non-negative", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffBaseSeconds = ptr[int32](-1) })),
			[]FieldError{{"Configuration", p + "backoffBaseSeconds", "Invalid value: -1: must be greater than or equal to 0"}}},
		{"backoffBaseSeconds may be 0", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffBaseSeconds = ptr[int32](0) })), nil},
		{"backoffMaxSeconds non-negative", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffMaxSeconds = ptr[int32](-1) })),
			[]FieldError{{"Configuration", p + "backoffMaxSeconds", "Invalid value: -1: must be greater than or equal to 0"}}},
		{"backoffMaxSeconds may be 0", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffMaxSeconds = ptr[int32](0) })), nil},
		// Issue 15 cause 1: Kueue caps the wait, it does not refuse this.
		{"backoffMaxSeconds below base", baseConfig(rs(func(r *RequeuingStrategy) { r.BackoffMaxSeconds = ptr[int32](59) })), nil},
		{"nothing checked while disabled", baseConfig(func(c *Configuration) {
			c.WaitForPodsReady.Enable = false
			c.WaitForPodsReady.RequeuingStrategy.BackoffLimitCount = ptr[int32](-1)
		}), nil},
	})
}

func TestValidateJob(t *testing.T) {
	const job = "Job/team-a/job"
	runValidateCases(t, []validateCase{
		{"queue-name label required", baseJob(func(j *Job) { j.Labels = nil }),
			[]FieldError{{job, "metadata.labels[kueue.x-k8s.io/queue-name]", "Required value: jetqueue only queues Jobs that name their LocalQueue in this label"}}},
		{"queue-name label is a DNS subdomain", baseJob(func(j *Job) { j.Labels[QueueNameLabel] = "Bad_Name" }),
			[]FieldError{{job, "metadata.labels[kueue.x-k8s.io/queue-name]", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"priority-class label is a DNS subdomain", baseJob(func(j *Job) { j.Labels[PriorityClassLabel] = "Bad_Name" }),
			[]FieldError{{job, "metadata.labels[kueue.x-k8s.io/priority-class]", `Invalid value: "Bad_Name": ` + dnsSubdomainMsg}}},
		{"parallelism non-negative", baseJob(func(j *Job) { j.Spec.Parallelism = ptr[int32](-1) }),
			[]FieldError{{job, "spec.parallelism", "Invalid value: -1: must be greater than or equal to 0"}}},
		{"completions non-negative", baseJob(func(j *Job) { j.Spec.Completions = ptr[int32](-1) }),
			[]FieldError{{job, "spec.completions", "Invalid value: -1: must be greater than or equal to 0"}}},
		{"min-parallelism an integer", baseJob(func(j *Job) { j.Annotations = map[string]string{JobMinParallelismAnnot: "two"} }),
			[]FieldError{{job, "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", `Invalid value: "two": must be an integer`}}},
		{"min-parallelism below the pod count", baseJob(func(j *Job) { j.Annotations = map[string]string{JobMinParallelismAnnot: "3"} }),
			[]FieldError{{job, "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", "Invalid value: 3: must be at least 1 and less than the Job's pod count min(parallelism, completions) = 3"}}},
		{"min-parallelism positive", baseJob(func(j *Job) { j.Annotations = map[string]string{JobMinParallelismAnnot: "0"} }),
			[]FieldError{{job, "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", "Invalid value: 0: must be at least 1 and less than the Job's pod count min(parallelism, completions) = 3"}}},
		{"at least one container", baseJob(func(j *Job) { j.Spec.Template.Spec.Containers = nil }),
			[]FieldError{{job, "spec.template.spec.containers", "Required value"}}},
		{"no pods request", baseJob(func(j *Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Requests["pods"] = q("1")
		}), []FieldError{{job, "spec.template.spec.containers[0].resources.requests[pods]", `Invalid value: "pods": the key is reserved for internal kueue use`}}},
	})
}

func TestValidateRefusesOtherKinds(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: nsMeta("default", "p")}
	err := Validate(pod)
	if !errors.Is(err, ErrUnsupportedKind) {
		t.Fatalf("Validate(Pod) = %v, want ErrUnsupportedKind", err)
	}
	diffErrors(t, []FieldError{{"Pod/default/p", "kind", "unsupported kind Pod is not handled by jetqueue"}}, err)
	if err := Validate((*ClusterQueue)(nil)); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Validate(nil ClusterQueue) = %v", err)
	}
}

func TestValidateDoesNotMutate(t *testing.T) {
	cq := baseCQ().(*ClusterQueue)
	before := cq.DeepCopy()
	_ = Validate(cq)
	if !equalJSON(t, before, cq) {
		t.Error("Validate changed the object")
	}
}
