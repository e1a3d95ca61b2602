package api

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// Detail texts shared with Kueue's webhooks, so messages match what a Kueue
// user sees from kubectl.
const (
	isNegativeMsg     = "must be greater than or equal to 0"
	limitIsEmptyMsg   = "must be nil when cohort is empty"
	lendingLimitMsg   = "must be less than or equal to the nominalQuota"
	podsReservedMsg   = "the key is reserved for internal kueue use"
	notPositiveMsg    = "must be greater than 0"
	maxRFItems        = 8  // ResourceFlavor nodeLabels / nodeTaints / tolerations (CRD)
	maxCQItems        = 16 // resourceGroups, coveredResources, flavors (CRD)
	highestUserPrio   = 1000000000
	systemClassPrefix = "system-"
)

// Validate applies Kueue's webhook and CRD-schema validation (and the
// Kubernetes rules for PriorityClass and the parts of Job that matter to
// Kueue), plus a few checks a careful system needs. It returns Errors, each
// naming the object and the field path, or nil. Validate expects a defaulted
// object (Decode defaults); on an undefaulted ClusterQueue an empty
// queueingStrategy is reported as unsupported. It never mutates obj.
func Validate(obj Object) error {
	if isNilObject(obj) {
		return Errors{{Object: ObjectRef(obj), Message: "object is nil"}}
	}
	if wl, ok := obj.(*Workload); ok && workloadValid(wl) {
		return nil // the common case, accepted without building paths (validfast.go)
	}
	return validateFull(obj)
}

// validateFull is Validate without the fast accept: it names every error.
func validateFull(obj Object) error {
	ref := ObjectRef(obj)
	var errs field.ErrorList
	switch o := obj.(type) {
	case *ResourceFlavor:
		errs = append(validateMeta(&o.ObjectMeta, false, false), validateResourceFlavor(o)...)
	case *ClusterQueue:
		errs = append(validateMeta(&o.ObjectMeta, false, false), validateClusterQueue(o)...)
	case *LocalQueue:
		errs = append(validateMeta(&o.ObjectMeta, true, false), validateLocalQueue(o)...)
	case *WorkloadPriorityClass:
		errs = validateMeta(&o.ObjectMeta, false, false)
	case *PriorityClass:
		errs = append(validateMeta(&o.ObjectMeta, false, false), validatePriorityClass(o)...)
	case *Workload:
		errs = append(validateMeta(&o.ObjectMeta, true, true), validateWorkload(o)...)
	case *Job:
		errs = append(validateMeta(&o.ObjectMeta, true, true), validateJob(o)...)
	case *Configuration:
		errs = validateConfiguration(o)
	default:
		return Errors{{Object: ref, Field: "kind", Message: fmt.Sprintf("%s %s is not handled by jetqueue", ErrUnsupportedKind, kindOf(obj))}}
	}
	return fromFieldErrors(ref, errs).orNil()
}

// validateMeta: names are DNS-1123 subdomains as for any Kubernetes object.
// Only submitted objects (Workload, Job) may rely on generateName; the
// configuration kinds are applied by name, so theirs is required.
// A rule added here must be added to workloadValid (validfast.go) too.
func validateMeta(m *metav1.ObjectMeta, namespaced, generateNameOK bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("metadata")
	if m.GenerateName != "" {
		if !generateNameOK {
			errs = append(errs, field.Forbidden(p.Child("generateName"), "not supported for this kind; set metadata.name"))
		} else {
			for _, msg := range apivalidation.NameIsDNSSubdomain(m.GenerateName, true) {
				errs = append(errs, field.Invalid(p.Child("generateName"), m.GenerateName, msg))
			}
		}
	}
	switch {
	case m.Name != "":
		errs = append(errs, dnsSubdomain(m.Name, p.Child("name"))...)
	case !generateNameOK || m.GenerateName == "":
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch {
	case namespaced && m.Namespace == "":
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	case namespaced:
		for _, msg := range validation.IsDNS1123Label(m.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), m.Namespace, msg))
		}
	case m.Namespace != "":
		errs = append(errs, field.Forbidden(p.Child("namespace"), "not allowed on this type"))
	}
	errs = append(errs, validateLabels(m.Labels, p.Child("labels"))...)
	for _, k := range sortedKeys(m.Annotations) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), k, msg))
		}
	}
	if _, _, err := ExpectedRuntime(m.Annotations); err != nil {
		errs = append(errs, err)
	}
	if err := apivalidation.ValidateAnnotationsSize(m.Annotations); err != nil {
		errs = append(errs, field.TooLong(p.Child("annotations"), "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// validateLabels is metav1 validation with a deterministic order and the
// offending key in the path.
func validateLabels(labels map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(p.Key(k), labels[k], msg))
		}
	}
	return errs
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func dnsSubdomain(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// nameReference is Kueue's validateNameReference with an explicit "Required"
// for the empty string, which Kueue reports as a regex mismatch.
func nameReference(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return dnsSubdomain(name, p)
}

func oneOf[T ~string](v T, p *field.Path, allowed ...T) field.ErrorList {
	if slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, string(v), allowed)}
}

func nonNegative(q resource.Quantity, p *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, q.String(), isNegativeMsg)}
	}
	return nil
}

// quantity is a request, limit or quota amount: non-negative, and exact in
// the int64 unit the scheduler counts the resource in.
func quantity(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	if errs := nonNegative(q, p); len(errs) > 0 {
		return errs
	}
	_, exact := quota.ValueExact(name, q)
	return exactQuantity(name, q.String(), exact, p)
}

func validateResourceFlavor(rf *ResourceFlavor) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if n := len(rf.Spec.NodeLabels); n > maxRFItems {
		errs = append(errs, field.TooMany(p.Child("nodeLabels"), n, maxRFItems))
	}
	errs = append(errs, validateLabels(rf.Spec.NodeLabels, p.Child("nodeLabels"))...)
	if n := len(rf.Spec.NodeTaints); n > maxRFItems {
		errs = append(errs, field.TooMany(p.Child("nodeTaints"), n, maxRFItems))
	}
	errs = append(errs, validateTaints(rf.Spec.NodeTaints, p.Child("nodeTaints"))...)
	if n := len(rf.Spec.Tolerations); n > maxRFItems {
		errs = append(errs, field.TooMany(p.Child("tolerations"), n, maxRFItems))
	}
	errs = append(errs, validateTolerations(rf.Spec.Tolerations, p.Child("tolerations"))...)
	return errs
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

func validateTaints(taints []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := map[keyEffect]bool{}
	for i, t := range taints {
		ip := p.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, ip.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		if t.Effect == "" {
			errs = append(errs, field.Required(ip.Child("effect"), ""))
		} else {
			errs = append(errs, oneOf(t.Effect, ip.Child("effect"), taintEffects...)...)
		}
		ke := keyEffect{t.Key, t.Effect}
		if seen[ke] {
			e := field.Duplicate(ip, t.Key+":"+string(t.Effect))
			e.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, e)
		}
		seen[ke] = true
	}
	return errs
}

func validateTolerations(tols []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tols {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, ip.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), string(t.Operator),
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), string(t.Effect), "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				errs = append(errs, field.Invalid(ip.Child("value"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), string(t.Operator),
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, oneOf(t.Effect, ip.Child("effect"), taintEffects...)...)
		}
	}
	return errs
}

func validateClusterQueue(cq *ClusterQueue) field.ErrorList {
	var errs field.ErrorList
	s := &cq.Spec
	p := field.NewPath("spec")
	if s.Cohort != "" {
		errs = append(errs, dnsSubdomain(s.Cohort, p.Child("cohort"))...)
	}
	errs = append(errs, oneOf(s.QueueingStrategy, p.Child("queueingStrategy"), StrictFIFO, BestEffortFIFO)...)
	errs = append(errs, validateResourceGroups(s.ResourceGroups, s.Cohort, p.Child("resourceGroups"))...)
	errs = append(errs, validateNamespaceSelector(s.NamespaceSelector, p.Child("namespaceSelector"))...)
	if pr := s.Preemption; pr != nil {
		pp := p.Child("preemption")
		errs = append(errs, oneOf(pr.WithinClusterQueue, pp.Child("withinClusterQueue"),
			PreemptionNever, PreemptionLowerPriority, PreemptionLowerOrNewerEqualPriority)...)
		errs = append(errs, oneOf(pr.ReclaimWithinCohort, pp.Child("reclaimWithinCohort"),
			PreemptionNever, PreemptionLowerPriority, PreemptionAny)...)
		if b := pr.BorrowWithinCohort; b != nil {
			errs = append(errs, oneOf(b.Policy, pp.Child("borrowWithinCohort", "policy"),
				BorrowWithinCohortNever, BorrowWithinCohortLowerPriority)...)
			if pr.ReclaimWithinCohort == PreemptionNever && b.Policy != BorrowWithinCohortNever {
				errs = append(errs, field.Invalid(pp, field.OmitValueType{},
					"reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"))
			}
		}
	}
	if ff := s.FlavorFungibility; ff != nil {
		fp := p.Child("flavorFungibility")
		errs = append(errs, oneOf(ff.WhenCanBorrow, fp.Child("whenCanBorrow"), FungibilityBorrow, FungibilityTryNextFlavor)...)
		errs = append(errs, oneOf(ff.WhenCanPreempt, fp.Child("whenCanPreempt"), FungibilityPreempt, FungibilityTryNextFlavor)...)
	}
	if s.StopPolicy != nil {
		errs = append(errs, oneOf(*s.StopPolicy, p.Child("stopPolicy"), StopPolicyNone, StopPolicyHold, StopPolicyHoldAndDrain)...)
	}
	// admissionChecks are accepted as Kueue accepts them; jetqueue has no
	// AdmissionCheck objects, so such a queue is inactive (engine compile).
	return errs
}

func validateNamespaceSelector(sel *metav1.LabelSelector, p *field.Path) field.ErrorList {
	return metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, p)
}

func validateResourceGroups(groups []ResourceGroup, cohort string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(groups) > maxCQItems {
		errs = append(errs, field.TooMany(p, len(groups), maxCQItems))
	}
	seenResources := map[corev1.ResourceName]bool{}
	seenFlavors := map[string]bool{}
	for i, rg := range groups {
		gp := p.Index(i)
		cp := gp.Child("coveredResources")
		switch n := len(rg.CoveredResources); {
		case n == 0:
			errs = append(errs, field.Required(cp, ""))
		case n > maxCQItems:
			errs = append(errs, field.TooMany(cp, n, maxCQItems))
		}
		for j, name := range rg.CoveredResources {
			for _, msg := range validation.IsQualifiedName(string(name)) {
				errs = append(errs, field.Invalid(cp.Index(j), string(name), msg))
			}
			if seenResources[name] {
				errs = append(errs, field.Duplicate(cp.Index(j), string(name)))
			}
			seenResources[name] = true
		}
		fp := gp.Child("flavors")
		switch n := len(rg.Flavors); {
		case n == 0:
			errs = append(errs, field.Required(fp, ""))
		case n > maxCQItems:
			errs = append(errs, field.TooMany(fp, n, maxCQItems))
		}
		for j, fq := range rg.Flavors {
			errs = append(errs, validateFlavorQuotas(fq, rg.CoveredResources, cohort, fp.Index(j))...)
			if seenFlavors[fq.Name] {
				errs = append(errs, field.Duplicate(fp.Index(j).Child("name"), fq.Name))
			}
			seenFlavors[fq.Name] = true
		}
	}
	return errs
}

func validateFlavorQuotas(fq FlavorQuotas, covered []corev1.ResourceName, cohort string, p *field.Path) field.ErrorList {
	errs := nameReference(fq.Name, p.Child("name"))
	rp := p.Child("resources")
	if len(fq.Resources) != len(covered) {
		errs = append(errs, field.Invalid(rp, field.OmitValueType{}, "must have the same number of resources as the coveredResources"))
	}
	for i, rq := range fq.Resources {
		if i >= len(covered) {
			break
		}
		qp := rp.Index(i)
		if rq.Name != covered[i] {
			errs = append(errs, field.Invalid(qp.Child("name"), string(rq.Name), "must match the name in coveredResources"))
		}
		errs = append(errs, quantity(rq.Name, rq.NominalQuota, qp.Child("nominalQuota"))...)
		if rq.BorrowingLimit != nil {
			lp := qp.Child("borrowingLimit")
			errs = append(errs, quantity(rq.Name, *rq.BorrowingLimit, lp)...)
			if cohort == "" {
				errs = append(errs, field.Invalid(lp, rq.BorrowingLimit.String(), limitIsEmptyMsg))
			}
		}
		// jetqueue runs with Kueue's LendingLimit gate on, so these checks
		// always apply (Kueue skips them while the alpha gate is off).
		if rq.LendingLimit != nil {
			lp := qp.Child("lendingLimit")
			errs = append(errs, quantity(rq.Name, *rq.LendingLimit, lp)...)
			if cohort == "" {
				errs = append(errs, field.Invalid(lp, rq.LendingLimit.String(), limitIsEmptyMsg))
			}
			if rq.LendingLimit.Cmp(rq.NominalQuota) > 0 {
				errs = append(errs, field.Invalid(lp, rq.LendingLimit.String(), lendingLimitMsg))
			}
		}
	}
	return errs
}

func validateLocalQueue(lq *LocalQueue) field.ErrorList {
	errs := nameReference(lq.Spec.ClusterQueue, field.NewPath("spec", "clusterQueue"))
	if p := lq.Spec.StopPolicy; p != nil {
		errs = append(errs, oneOf(*p, field.NewPath("spec", "stopPolicy"), StopPolicyNone, StopPolicyHold, StopPolicyHoldAndDrain)...)
	}
	return errs
}

// System classes Kubernetes creates itself; a user may re-declare them only
// with the same values.
var systemPriorityClasses = map[string]int32{
	"system-cluster-critical": 2000000000,
	"system-node-critical":    2000001000,
}

func validatePriorityClass(pc *PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(pc.Name, systemClassPrefix) {
		want, known := systemPriorityClasses[pc.Name]
		var why string
		switch {
		case !known:
			why = fmt.Sprintf("%s is not a known system priority class", pc.Name)
		case pc.Value != want:
			why = fmt.Sprintf("value of %s PriorityClass must be %d", pc.Name, want)
		case pc.GlobalDefault:
			why = fmt.Sprintf("globalDefault of %s PriorityClass must be false", pc.Name)
		}
		if why != "" {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+systemClassPrefix+"' prefix are reserved for system use only. error: "+why))
		}
	} else if pc.Value > highestUserPrio {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %d", highestUserPrio)))
	}
	if pc.PreemptionPolicy != nil {
		errs = append(errs, oneOf(*pc.PreemptionPolicy, field.NewPath("preemptionPolicy"), corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	return errs
}

// A rule added here must be added to workloadValid (validfast.go) too.
func validateWorkload(wl *Workload) field.ErrorList {
	var errs field.ErrorList
	s := &wl.Spec
	p := field.NewPath("spec")
	pp := p.Child("podSets")
	switch n := len(s.PodSets); {
	case n == 0:
		errs = append(errs, field.Required(pp, ""))
	case n > MaxPodSets:
		errs = append(errs, field.TooMany(pp, n, MaxPodSets))
	}
	names := map[string]bool{}
	withMinCount := 0
	countsOK := true
	for i := range s.PodSets {
		ps := &s.PodSets[i]
		ip := pp.Index(i)
		if ps.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Label(ps.Name) {
				errs = append(errs, field.Invalid(ip.Child("name"), ps.Name, msg))
			}
			if names[ps.Name] {
				errs = append(errs, field.Duplicate(ip.Child("name"), ps.Name))
			}
			names[ps.Name] = true
		}
		countOK := false
		switch {
		case ps.Count < 1:
			errs = append(errs, field.Invalid(ip.Child("count"), int64(ps.Count), "must be greater than or equal to 1"))
		case ps.Count > MaxPodSetCount:
			errs = append(errs, field.Invalid(ip.Child("count"), int64(ps.Count), fmt.Sprintf("must be less than or equal to %d", MaxPodSetCount)))
		default:
			countOK = true
		}
		countsOK = countsOK && countOK
		if ps.MinCount != nil {
			withMinCount++
			// Kueue's validatePodSet: 0 <= minCount <= count.
			if m := *ps.MinCount; m < 0 || m > ps.Count {
				errs = append(errs, field.Forbidden(ip.Child("minCount"), fmt.Sprintf("%d should be positive and less or equal to %d", m, ps.Count)))
			}
		}
		// The Workload CRD's schema requires the containers field, not
		// a container in it: an empty list is accepted.
		if ps.Template.Spec.Containers == nil {
			errs = append(errs, field.Required(ip.Child("template", "spec", "containers"), ""))
		}
		errs = append(errs, validatePodSpec(&ps.Template.Spec, ip.Child("template", "spec"))...)
	}
	if withMinCount > 1 {
		errs = append(errs, field.Invalid(pp, int64(withMinCount), "at most one podSet can use minCount"))
	}
	// The totals are only meaningful once every count and amount is.
	if countsOK && len(errs) == 0 {
		errs = append(errs, validateTotals(s.PodSets, pp)...)
	}
	if s.PriorityClassName != "" {
		errs = append(errs, dnsSubdomain(s.PriorityClassName, p.Child("priorityClassName"))...)
		if s.Priority == nil {
			errs = append(errs, field.Required(p.Child("priority"), "priority should not be nil when priorityClassName is set"))
		}
	}
	errs = append(errs, oneOf(s.PriorityClassSource, p.Child("priorityClassSource"), "", WorkloadPriorityClassSrc, PodPriorityClassSrc)...)
	if s.QueueName != "" {
		errs = append(errs, dnsSubdomain(s.QueueName, p.Child("queueName"))...)
	}
	return errs
}

// validatePodSpec covers what matters for quota, plus the container name the
// CRD schema requires: non-negative quantities, and no "pods" resource,
// which the scheduler reserves for its own pod counting (a limit would
// become a request). The rest of the pod spec is not ours to judge;
// jetqueue does not run pods. How many containers there must be is the
// caller's: a Job's pod template needs one (Kubernetes' ValidatePodSpec),
// a Workload's podSet template only the field (the Workload CRD's schema).
// A rule added here must be added to workloadValid (validfast.go) too.
func validatePodSpec(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, group := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range group.cs {
			cp := p.Child(group.name).Index(i)
			if group.cs[i].Name == "" {
				errs = append(errs, field.Required(cp.Child("name"), ""))
			}
			errs = append(errs, validateContainerResources(&group.cs[i].Resources, cp.Child("resources"))...)
		}
	}
	for _, name := range sortedKeys(spec.Overhead) {
		errs = append(errs, quantity(name, spec.Overhead[name], p.Child("overhead").Key(string(name)))...)
	}
	return errs
}

// A rule added here must be added to workloadValid (validfast.go) too.
func validateContainerResources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, name := range sortedKeys(list.rl) {
			kp := p.Child(list.name).Key(string(name))
			// Kueue's validateContainer reserves "pods" in requests only; a
			// pods limit is accepted and ignored (the scheduler counts pods).
			if name == ResourcePods && list.name == "requests" {
				errs = append(errs, field.Invalid(kp, string(name), podsReservedMsg))
			}
			errs = append(errs, quantity(name, list.rl[name], kp)...)
		}
	}
	return errs
}

// validateConfiguration is Kueue v0.6.3's validateWaitForPodsReady
// (pkg/config/validation.go): only while waitForPodsReady is enabled, the
// timestamp is one of the two and backoffLimitCount is not negative. The
// timeout is not checked (a timeout of 0 or less times every admitted
// workload out at once). backoffBaseSeconds and backoffMaxSeconds, which
// Kueue added in v0.7/v0.8, follow its rule there: each is not negative;
// the wait is capped at backoffMaxSeconds whatever the base (0 means no
// cap).
func validateConfiguration(c *Configuration) field.ErrorList {
	w := c.WaitForPodsReady
	if w == nil || !w.Enable {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("waitForPodsReady")
	r := w.RequeuingStrategy
	if r == nil {
		return errs
	}
	rp := p.Child("requeuingStrategy")
	if r.Timestamp != nil {
		errs = append(errs, oneOf(*r.Timestamp, rp.Child("timestamp"), RequeueByCreation, RequeueByEviction)...)
	}
	if r.BackoffLimitCount != nil && *r.BackoffLimitCount < 0 {
		errs = append(errs, field.Invalid(rp.Child("backoffLimitCount"), int64(*r.BackoffLimitCount), isNegativeMsg))
	}
	if r.BackoffBaseSeconds != nil && *r.BackoffBaseSeconds < 0 {
		errs = append(errs, field.Invalid(rp.Child("backoffBaseSeconds"), int64(*r.BackoffBaseSeconds), isNegativeMsg))
	}
	if r.BackoffMaxSeconds != nil && *r.BackoffMaxSeconds < 0 {
		errs = append(errs, field.Invalid(rp.Child("backoffMaxSeconds"), int64(*r.BackoffMaxSeconds), isNegativeMsg))
	}
	return errs
}
