package api

import (
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kueue's v1beta2 at the door.
//
// jetqueue's types are Kueue's v1beta1 (the hub). A document written as
// kueue.x-k8s.io/v1beta2, as current Kueue writes it, is decoded strictly
// into the v1beta2 shape below, so an error names the field as the user
// wrote it, then converted as Kueue's own conversion functions do
// (kubernetes-sigs/kueue apis/kueue/v1beta1/*_conversion.go):
//
//   - ClusterQueue spec.cohortName is v1beta1's spec.cohort;
//   - ClusterQueue spec.flavorFungibility MayStopSearch is v1beta1's Borrow
//     (whenCanBorrow) and Preempt (whenCanPreempt);
//   - ClusterQueue spec.admissionChecksStrategy.admissionChecks[].name is
//     v1beta1's spec.admissionChecks (a rule limited to onFlavors has no
//     v1beta1 form and is refused);
//   - Workload spec.priorityClassRef {group, kind, name} is v1beta1's
//     priorityClassName and priorityClassSource;
//   - ResourceFlavor, LocalQueue and WorkloadPriorityClass keep their shape;
//   - a config.kueue.x-k8s.io/v1beta2 Configuration has no
//     waitForPodsReady.enable: the block being there enables it, and its
//     timeout is a value, not a pointer (Kueue apis/config/v1beta2
//     configuration_types.go). An absent timeout takes jetqueue's default.
//     waitForPodsReady.recoveryTimeout, fairSharing and
//     admissionFairSharing are refused by name (laterKueueFields).

// KueueV1beta2APIVersion is current Kueue's storage version.
const KueueV1beta2APIVersion = "kueue.x-k8s.io/v1beta2"

// ConfigV1beta2APIVersion is current Kueue's Configuration version.
const ConfigV1beta2APIVersion = "config.kueue.x-k8s.io/v1beta2"

// Kueue v1beta2's FlavorFungibility value that replaced Borrow and Preempt.
const FungibilityMayStopSearch FlavorFungibilityPolicy = "MayStopSearch"

// v1beta2 PriorityClassRef groups and kinds.
const (
	priorityGroupWorkload = "kueue.x-k8s.io"
	priorityGroupPod      = "scheduling.k8s.io"
)

type configurationV1beta2 struct {
	metav1.TypeMeta  `json:",inline"`
	WaitForPodsReady *waitForPodsReadyV1beta2 `json:"waitForPodsReady,omitempty"`
}

type waitForPodsReadyV1beta2 struct {
	Timeout           metav1.Duration    `json:"timeout"`
	BlockAdmission    *bool              `json:"blockAdmission,omitempty"`
	RequeuingStrategy *RequeuingStrategy `json:"requeuingStrategy,omitempty"`
}

type clusterQueueV1beta2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              clusterQueueSpecV1beta2 `json:"spec,omitempty"`
}

type clusterQueueSpecV1beta2 struct {
	ResourceGroups          []ResourceGroup          `json:"resourceGroups,omitempty"`
	CohortName              string                   `json:"cohortName,omitempty"`
	QueueingStrategy        QueueingStrategy         `json:"queueingStrategy,omitempty"`
	NamespaceSelector       *metav1.LabelSelector    `json:"namespaceSelector,omitempty"`
	FlavorFungibility       *FlavorFungibility       `json:"flavorFungibility,omitempty"`
	Preemption              *ClusterQueuePreemption  `json:"preemption,omitempty"`
	AdmissionChecksStrategy *admissionChecksStrategy `json:"admissionChecksStrategy,omitempty"`
	StopPolicy              *StopPolicy              `json:"stopPolicy,omitempty"`
}

type admissionChecksStrategy struct {
	AdmissionChecks []admissionCheckStrategyRule `json:"admissionChecks,omitempty"`
}

type admissionCheckStrategyRule struct {
	Name      string   `json:"name,omitempty"`
	OnFlavors []string `json:"onFlavors,omitempty"`
}

type workloadV1beta2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              workloadSpecV1beta2 `json:"spec,omitempty"`
}

type workloadSpecV1beta2 struct {
	PodSets          []PodSet          `json:"podSets"`
	QueueName        string            `json:"queueName,omitempty"`
	PriorityClassRef *priorityClassRef `json:"priorityClassRef,omitempty"`
	Priority         *int32            `json:"priority,omitempty"`
	Active           *bool             `json:"active,omitempty"`
}

type priorityClassRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name,omitempty"`
}

// decodeTarget is the Go value a document of kind and apiVersion decodes
// into; convert turns it into jetqueue's object. ok is false for a kind or
// apiVersion jetqueue does not take.
func decodeTarget(kind, apiVersion string) (target any, ok bool) {
	if kind == KindConfiguration && apiVersion == ConfigV1beta2APIVersion {
		return &configurationV1beta2{}, true
	}
	if apiVersion == KueueV1beta2APIVersion {
		switch kind {
		case KindClusterQueue:
			return &clusterQueueV1beta2{}, true
		case KindWorkload:
			return &workloadV1beta2{}, true
		case KindResourceFlavor, KindLocalQueue, KindWorkloadPriorityClass:
			return newObject(kind), true
		}
		return nil, false
	}
	if want, known := kindAPIVersion[kind]; !known || apiVersion != want {
		return nil, false
	}
	return newObject(kind), true
}

// acceptsAPIVersion reports whether kind is taken at apiVersion.
func acceptsAPIVersion(kind, apiVersion string) bool {
	_, ok := decodeTarget(kind, apiVersion)
	return ok
}

// convert turns a decoded target into jetqueue's (v1beta1) object.
func convert(target any) (Object, *field.Error) {
	switch t := target.(type) {
	case *configurationV1beta2:
		c := &Configuration{TypeMeta: metav1.TypeMeta{APIVersion: ConfigAPIVersion, Kind: KindConfiguration}}
		if w := t.WaitForPodsReady; w != nil {
			c.WaitForPodsReady = &WaitForPodsReady{Enable: true, BlockAdmission: w.BlockAdmission, RequeuingStrategy: w.RequeuingStrategy}
			if w.Timeout != (metav1.Duration{}) {
				timeout := w.Timeout
				c.WaitForPodsReady.Timeout = &timeout
			}
		}
		return c, nil
	case *clusterQueueV1beta2:
		s := t.Spec
		cq := &ClusterQueue{ObjectMeta: t.ObjectMeta, Spec: ClusterQueueSpec{
			ResourceGroups: s.ResourceGroups, Cohort: s.CohortName, QueueingStrategy: s.QueueingStrategy,
			NamespaceSelector: s.NamespaceSelector, FlavorFungibility: s.FlavorFungibility,
			Preemption: s.Preemption, StopPolicy: s.StopPolicy,
		}}
		cq.TypeMeta = metav1.TypeMeta{APIVersion: KueueAPIVersion, Kind: KindClusterQueue}
		if ff := cq.Spec.FlavorFungibility; ff != nil {
			if ff.WhenCanBorrow == FungibilityMayStopSearch {
				ff.WhenCanBorrow = FungibilityBorrow
			} else if ff.WhenCanBorrow == FungibilityBorrow {
				return nil, field.NotSupported(field.NewPath("spec", "flavorFungibility", "whenCanBorrow"), ff.WhenCanBorrow,
					[]string{string(FungibilityMayStopSearch), string(FungibilityTryNextFlavor)})
			}
			if ff.WhenCanPreempt == FungibilityMayStopSearch {
				ff.WhenCanPreempt = FungibilityPreempt
			} else if ff.WhenCanPreempt == FungibilityPreempt {
				return nil, field.NotSupported(field.NewPath("spec", "flavorFungibility", "whenCanPreempt"), ff.WhenCanPreempt,
					[]string{string(FungibilityMayStopSearch), string(FungibilityTryNextFlavor)})
			}
		}
		if st := s.AdmissionChecksStrategy; st != nil {
			for i, rule := range st.AdmissionChecks {
				if len(rule.OnFlavors) > 0 {
					return nil, field.Invalid(field.NewPath("spec", "admissionChecksStrategy", "admissionChecks").Index(i).Child("onFlavors"),
						rule.OnFlavors, "an admission check limited to some flavors is not implemented by jetqueue")
				}
				cq.Spec.AdmissionChecks = append(cq.Spec.AdmissionChecks, rule.Name)
			}
		}
		return cq, nil
	case *workloadV1beta2:
		s := t.Spec
		wl := &Workload{ObjectMeta: t.ObjectMeta, Spec: WorkloadSpec{
			PodSets: s.PodSets, QueueName: s.QueueName, Priority: s.Priority, Active: s.Active,
		}}
		wl.TypeMeta = metav1.TypeMeta{APIVersion: KueueAPIVersion, Kind: KindWorkload}
		if ref := s.PriorityClassRef; ref != nil {
			p := field.NewPath("spec", "priorityClassRef")
			switch {
			case ref.Group == priorityGroupWorkload && ref.Kind == KindWorkloadPriorityClass:
				wl.Spec.PriorityClassSource = WorkloadPriorityClassSrc
			case ref.Group == priorityGroupPod && ref.Kind == KindPriorityClass:
				wl.Spec.PriorityClassSource = PodPriorityClassSrc
			default:
				return nil, field.Invalid(p, fmt.Sprintf("%s/%s", ref.Group, ref.Kind),
					fmt.Sprintf("group and kind must be %s/%s or %s/%s", priorityGroupWorkload, KindWorkloadPriorityClass, priorityGroupPod, KindPriorityClass))
			}
			wl.Spec.PriorityClassName = ref.Name
		}
		return wl, nil
	case Object:
		if tm, ok := typeMetaOf(t); ok && tm.APIVersion == KueueV1beta2APIVersion {
			tm.APIVersion = KueueAPIVersion
		}
		return t, nil
	}
	return nil, field.InternalError(nil, fmt.Errorf("no conversion for %T", target))
}

// typeMetaOf is the TypeMeta of a Kueue object whose shape v1beta2 keeps.
func typeMetaOf(o Object) (*metav1.TypeMeta, bool) {
	switch t := o.(type) {
	case *ResourceFlavor:
		return &t.TypeMeta, true
	case *LocalQueue:
		return &t.TypeMeta, true
	case *WorkloadPriorityClass:
		return &t.TypeMeta, true
	}
	return nil, false
}

// laterKueueFields are fields of Kueue releases after v0.6 that jetqueue
// does not implement. They are refused by name rather than as unknown
// fields. Paths are written without list indices.
var laterKueueFields = map[string]map[string]string{
	KindClusterQueue: {
		"spec.fairSharing":               "fair sharing",
		"spec.admissionScope":            "admission scope",
		"spec.concurrentAdmissionPolicy": "concurrent admission",
	},
	KindLocalQueue: {
		"spec.fairSharing": "fair sharing",
	},
	KindResourceFlavor: {
		"spec.topologyName": "topology-aware scheduling",
	},
	KindConfiguration: {
		"waitForPodsReady.recoveryTimeout": "PodsReady recovery timeout",
		"fairSharing":                      "fair sharing",
		"admissionFairSharing":             "admission fair sharing",
	},
	KindWorkload: {
		"spec.maximumExecutionTimeSeconds": "maximum execution time",
		"spec.preemptionGates":             "preemption gates",
		"spec.podSets.topologyRequest":     "topology-aware scheduling",
	},
}

var listIndex = regexp.MustCompile(`\[[^\]]*\]`)

// laterKueueField names the feature of a field from a later Kueue, or "".
func laterKueueField(kind, path string) string {
	fields := laterKueueFields[kind]
	if fields == nil {
		return ""
	}
	p := listIndex.ReplaceAllString(path, "")
	if f := fields[p]; f != "" {
		return f
	}
	for prefix, f := range fields {
		if strings.HasPrefix(p, prefix+".") {
			return f
		}
	}
	return ""
}

// supportedAPIVersions lists, quoted, the apiVersions kind is taken at.
func supportedAPIVersions(kind string) string {
	want := kindAPIVersion[kind]
	if kind == KindConfiguration {
		return fmt.Sprintf("%q, %q", ConfigAPIVersion, ConfigV1beta2APIVersion)
	}
	if want == KueueAPIVersion {
		return fmt.Sprintf("%q, %q", KueueAPIVersion, KueueV1beta2APIVersion)
	}
	return fmt.Sprintf("%q", want)
}

// namespaced lists the kinds that live in a namespace.
var namespaced = map[string]bool{KindLocalQueue: true, KindWorkload: true, KindJob: true}

// setDefaultNamespace gives a namespaced object without one the default
// namespace, as kubectl fills metadata.namespace from -n or its context.
func setDefaultNamespace(obj Object, ns string) {
	if ns == "" {
		return
	}
	var m *metav1.ObjectMeta
	switch o := obj.(type) {
	case *LocalQueue:
		m = &o.ObjectMeta
	case *Workload:
		m = &o.ObjectMeta
	case *Job:
		m = &o.ObjectMeta
	default:
		return
	}
	if m.Namespace == "" {
		m.Namespace = ns
	}
}

// laterKueueMsg is the message for such a field.
const laterKueueMsg = "%s is a field of Kueue releases after v0.6 (%s) that jetqueue does not implement"
