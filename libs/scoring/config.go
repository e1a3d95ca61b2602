package scoring

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Plugin names, as kube-scheduler profiles and SCORER.md's pluginWeights
// spell them.
const (
	PluginFitPlus = "NodeResourcesFitPlus"
	PluginScarce  = "ScarceResourceAvoidance"
)

// Strategy is a per-resource scoring strategy of NodeResourcesFitPlus.
type Strategy string

const (
	MostAllocated  Strategy = "MostAllocated"
	LeastAllocated Strategy = "LeastAllocated"
)

// MaxWeight bounds resource and plugin weights so that no weighted sum can
// overflow int64; kube-scheduler's own plugin weights are int32 as well.
const MaxWeight = math.MaxInt32

// ResourcesType is one resource's entry in NodeResourcesFitPlus args
// (Koordinator's config.ResourcesType).
type ResourcesType struct {
	Type   Strategy `json:"type"`
	Weight int64    `json:"weight"`
}

// ResourceTypesArgs mirrors the args of Koordinator's NodeResourcesFitPlus
// plugin (kind ResourceTypesArgs in its documentation, Go type
// NodeResourcesFitPlusArgs).
type ResourceTypesArgs struct {
	Resources map[corev1.ResourceName]ResourcesType `json:"resources"`
}

// ScarceResourceAvoidanceArgs mirrors the args of Koordinator's
// ScarceResourceAvoidance plugin.
type ScarceResourceAvoidanceArgs struct {
	Resources []corev1.ResourceName `json:"resources"`
}

// Config is the scorer's configuration in SCORER.md's `config` shape.
// Names that are not tracked (see Tracked) are accepted and ignored, as
// Koordinator ignores them.
type Config struct {
	FitPlus map[corev1.ResourceName]ResourcesType `json:"fitPlus"`
	Scarce  []corev1.ResourceName                 `json:"scarce"`
	// PluginWeights is keyed by PluginFitPlus and PluginScarce; 0 or
	// absent counts as 1, as in kube-scheduler profiles.
	PluginWeights map[string]int64 `json:"pluginWeights"`
}

// NewConfig assembles a Config from Koordinator-shaped plugin args and the
// profile's score-plugin weights.
func NewConfig(fit ResourceTypesArgs, scarce ScarceResourceAvoidanceArgs, fitWeight, scarceWeight int64) Config {
	return Config{
		FitPlus:       fit.Resources,
		Scarce:        scarce.Resources,
		PluginWeights: map[string]int64{PluginFitPlus: fitWeight, PluginScarce: scarceWeight},
	}
}

// ErrInvalidConfig marks every configuration error.
var ErrInvalidConfig = errors.New("invalid scorer config")

// FieldError names the offending field, rooted at "config".
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string        { return e.Field + ": " + e.Detail }
func (e *FieldError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate reports every problem, in field order. jetqueue is stricter than
// Koordinator, which scores an unknown strategy 0 and accepts any weight.
func (c *Config) Validate() error {
	var errs []error
	for _, name := range sortedKeys(c.FitPlus) {
		rt := c.FitPlus[name]
		f := fmt.Sprintf("config.fitPlus[%s]", name)
		if rt.Type != MostAllocated && rt.Type != LeastAllocated {
			errs = append(errs, &FieldError{f + ".type", fmt.Sprintf("unknown strategy %q (want %s or %s)", rt.Type, MostAllocated, LeastAllocated)})
		}
		if err := checkWeight(f+".weight", rt.Weight); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedKeys(c.PluginWeights) {
		f := fmt.Sprintf("config.pluginWeights[%s]", name)
		if name != PluginFitPlus && name != PluginScarce {
			errs = append(errs, &FieldError{f, fmt.Sprintf("unknown plugin (want %s or %s)", PluginFitPlus, PluginScarce)})
			continue
		}
		if err := checkWeight(f, c.PluginWeights[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkWeight(field string, w int64) error {
	switch {
	case w < 0:
		return &FieldError{field, fmt.Sprintf("must not be negative, got %d", w)}
	case w > MaxWeight:
		return &FieldError{field, fmt.Sprintf("must be at most %d, got %d", MaxWeight, w)}
	}
	return nil
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
