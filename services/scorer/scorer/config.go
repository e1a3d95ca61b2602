package scorer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

// Defaults of the scoring flags: the profile of Koordinator's proposal,
// GPUs binpacked and scarce, cpu and memory spread.
const (
	DefaultFitPlus = "nvidia.com/gpu=MostAllocated:2,cpu=LeastAllocated:1,memory=LeastAllocated:1"
	DefaultScarce  = "nvidia.com/gpu"
)

// ScoringOptions say where the scoring configuration comes from: a file
// in Koordinator's shape, or flags.
type ScoringOptions struct {
	// File is a KubeSchedulerConfiguration whose profile configures
	// NodeResourcesFitPlus and ScarceResourceAvoidance, or a stream of
	// their bare args documents (kind ResourceTypesArgs, alias
	// NodeResourcesFitPlusArgs, and kind ScarceResourceAvoidanceArgs).
	File string
	// SchedulerName picks the profile of a file with several.
	SchedulerName string
	// FitPlus is "name=Strategy[:weight],..." and Scarce "name,..." (or
	// "none"); empty means the default, and both exclude File.
	FitPlus, Scarce string
	// FitPlusWeight and ScarceWeight are the plugin weights; 0 keeps the
	// file's (or 1).
	FitPlusWeight, ScarceWeight int64
}

// Load builds and validates the scoring configuration. Errors name the
// flag or the file and the field.
func (o *ScoringOptions) Load() (scoring.Config, error) {
	var cfg scoring.Config
	var err error
	if o.File != "" {
		if o.FitPlus != "" || o.Scarce != "" {
			return cfg, errors.New("--config excludes --fit-plus and --scarce-resources")
		}
		data, rerr := os.ReadFile(o.File)
		if rerr != nil {
			return cfg, fmt.Errorf("--config: %w", rerr)
		}
		if cfg, err = ParseScoringFile(data, o.SchedulerName); err != nil {
			return cfg, fmt.Errorf("%s: %w", o.File, err)
		}
	} else if cfg, err = parseScoringFlags(o.FitPlus, o.Scarce); err != nil {
		return cfg, err
	}
	if cfg.PluginWeights == nil {
		cfg.PluginWeights = map[string]int64{}
	}
	for _, w := range []struct {
		plugin, flag string
		v            int64
	}{{scoring.PluginFitPlus, "--fit-plus-weight", o.FitPlusWeight}, {scoring.PluginScarce, "--scarce-weight", o.ScarceWeight}} {
		if w.v < 0 || w.v > scoring.MaxWeight {
			return cfg, fmt.Errorf("%s: must be between 0 and %d, got %d", w.flag, scoring.MaxWeight, w.v)
		}
		if w.v != 0 {
			cfg.PluginWeights[w.plugin] = w.v
		}
	}
	if _, err := scoring.New(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func parseScoringFlags(fit, scarce string) (scoring.Config, error) {
	if fit == "" {
		fit = DefaultFitPlus
	}
	if scarce == "" {
		scarce = DefaultScarce
	}
	cfg := scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{}}
	var errs []error
	for entry := range strings.SplitSeq(fit, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, spec, ok := strings.Cut(entry, "=")
		if !ok || name == "" {
			errs = append(errs, fmt.Errorf("--fit-plus: %q: want name=Strategy[:weight]", entry))
			continue
		}
		typ, weight, hasWeight := strings.Cut(spec, ":")
		rt := scoring.ResourcesType{Type: scoring.Strategy(typ), Weight: 1}
		if err := checkStrategy(rt.Type); err != nil {
			errs = append(errs, fmt.Errorf("--fit-plus: %s: %w", name, err))
		}
		if hasWeight {
			w, err := strconv.ParseInt(weight, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("--fit-plus: %s: weight %q is not an integer", name, weight))
			} else if err := checkWeight(w); err != nil {
				errs = append(errs, fmt.Errorf("--fit-plus: %s: weight %w", name, err))
			}
			rt.Weight = w
		}
		if _, dup := cfg.FitPlus[corev1.ResourceName(name)]; dup {
			errs = append(errs, fmt.Errorf("--fit-plus: %s: given twice", name))
		}
		cfg.FitPlus[corev1.ResourceName(name)] = rt
	}
	if scarce != "none" {
		for name := range strings.SplitSeq(scarce, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.Scarce = append(cfg.Scarce, corev1.ResourceName(name))
			}
		}
	}
	return cfg, errors.Join(errs...)
}

func checkStrategy(t scoring.Strategy) error {
	if t != scoring.MostAllocated && t != scoring.LeastAllocated {
		return fmt.Errorf("unknown strategy %q (want %s or %s)", t, scoring.MostAllocated, scoring.LeastAllocated)
	}
	return nil
}

func checkWeight(w int64) error {
	if w < 0 || w > scoring.MaxWeight {
		return fmt.Errorf("must be between 0 and %d, got %d", scoring.MaxWeight, w)
	}
	return nil
}

// Kinds of the args documents, as Koordinator's documentation and Go types
// spell them.
const (
	kindFitPlusArgs      = "ResourceTypesArgs"
	kindFitPlusArgsAlias = "NodeResourcesFitPlusArgs"
	kindScarceArgs       = "ScarceResourceAvoidanceArgs"
	kindSchedulerConfig  = "KubeSchedulerConfiguration"
)

// ParseScoringFile reads a scoring configuration in Koordinator's shape
// (see ScoringOptions.File). The parts of a KubeSchedulerConfiguration
// that are not about the two plugins are not looked at; the args of the
// two plugins are read strictly. A plugin the profile does not enable for
// scoring has its args ignored (it then scores every node 100, which does
// not change the order). Plugin weights come from plugins.score.enabled.
func ParseScoringFile(data []byte, schedulerName string) (scoring.Config, error) {
	var cfg scoring.Config
	docs, err := documents(data)
	if err != nil {
		return cfg, err
	}
	if len(docs) == 1 && kindOf(docs[0]) == kindSchedulerConfig {
		return parseSchedulerConfig(docs[0], schedulerName)
	}
	var errs []error
	seen := map[string]int{}
	for i, doc := range docs {
		path := fmt.Sprintf("documents[%d]", i)
		kind := kindOf(doc)
		switch kind {
		case kindFitPlusArgs, kindFitPlusArgsAlias:
			errs = append(errs, parseFitArgs(doc, path, &cfg))
		case kindScarceArgs:
			errs = append(errs, parseScarceArgs(doc, path, &cfg))
		case kindSchedulerConfig:
			errs = append(errs, fmt.Errorf("%s: a %s must be the only document", path, kind))
			continue
		default:
			errs = append(errs, fmt.Errorf("%s.kind: %q, want %s, %s or %s", path, kind, kindSchedulerConfig, kindFitPlusArgs, kindScarceArgs))
			continue
		}
		if j, dup := seen[normalKind(kind)]; dup {
			errs = append(errs, fmt.Errorf("%s: another %s after documents[%d]", path, kind, j))
		}
		seen[normalKind(kind)] = i
	}
	return cfg, errors.Join(errs...)
}

func normalKind(k string) string {
	if k == kindFitPlusArgsAlias {
		return kindFitPlusArgs
	}
	return k
}

// documents splits YAML (or JSON) into documents as JSON objects.
func documents(data []byte) ([]map[string]json.RawMessage, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]json.RawMessage
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("documents[%d]: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("documents[%d]: not YAML or JSON: %w", i, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(js, &m); err != nil || m == nil {
			if string(bytes.TrimSpace(js)) == "null" {
				continue
			}
			return nil, fmt.Errorf("documents[%d]: want an object", i)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("no configuration documents")
	}
	return out, nil
}

func kindOf(doc map[string]json.RawMessage) string {
	var k string
	_ = json.Unmarshal(doc["kind"], &k)
	return k
}

// strict reports keys outside allowed, in order.
func strict(m map[string]json.RawMessage, path string, allowed ...string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			errs = append(errs, fmt.Errorf("%s.%s: unknown field", path, k))
		}
	}
	return errors.Join(errs...)
}

func parseFitArgs(args map[string]json.RawMessage, path string, cfg *scoring.Config) error {
	errs := []error{strict(args, path, "apiVersion", "kind", "resources")}
	var resources map[string]map[string]json.RawMessage
	if err := json.Unmarshal(args["resources"], &resources); args["resources"] != nil && err != nil {
		return errors.Join(append(errs, fmt.Errorf("%s.resources: want an object of resource name to {type, weight}", path))...)
	}
	if cfg.FitPlus == nil {
		cfg.FitPlus = map[corev1.ResourceName]scoring.ResourcesType{}
	}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		rpath := fmt.Sprintf("%s.resources[%s]", path, name)
		e := resources[name]
		errs = append(errs, strict(e, rpath, "type", "weight"))
		var rt scoring.ResourcesType
		if err := json.Unmarshal(e["type"], &rt.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s.type: want MostAllocated or LeastAllocated", rpath))
		} else if err := checkStrategy(rt.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s.type: %w", rpath, err))
		}
		if e["weight"] != nil {
			if err := json.Unmarshal(e["weight"], &rt.Weight); err != nil {
				errs = append(errs, fmt.Errorf("%s.weight: want an integer, got %s", rpath, e["weight"]))
			} else if err := checkWeight(rt.Weight); err != nil {
				errs = append(errs, fmt.Errorf("%s.weight: %w", rpath, err))
			}
		}
		cfg.FitPlus[corev1.ResourceName(name)] = rt
	}
	return errors.Join(errs...)
}

func parseScarceArgs(args map[string]json.RawMessage, path string, cfg *scoring.Config) error {
	errs := []error{strict(args, path, "apiVersion", "kind", "resources")}
	if args["resources"] != nil {
		if err := json.Unmarshal(args["resources"], &cfg.Scarce); err != nil {
			errs = append(errs, fmt.Errorf("%s.resources: want a list of resource names", path))
		}
	}
	return errors.Join(errs...)
}

// The parts of a KubeSchedulerConfiguration the scorer reads.
type schedulerConfig struct {
	Profiles []profile `json:"profiles"`
}

type profile struct {
	SchedulerName string         `json:"schedulerName"`
	PluginConfig  []pluginConfig `json:"pluginConfig"`
	Plugins       *struct {
		Score *struct {
			Enabled []struct {
				Name   string `json:"name"`
				Weight *int64 `json:"weight"`
			} `json:"enabled"`
		} `json:"score"`
	} `json:"plugins"`
}

type pluginConfig struct {
	Name string                     `json:"name"`
	Args map[string]json.RawMessage `json:"args"`
}

// usesOurs: the profile configures or enables one of the two plugins.
func (p *profile) usesOurs() bool {
	if slices.ContainsFunc(p.PluginConfig, func(pc pluginConfig) bool { return ours(pc.Name) }) {
		return true
	}
	if p.Plugins != nil && p.Plugins.Score != nil {
		for _, e := range p.Plugins.Score.Enabled {
			if ours(e.Name) {
				return true
			}
		}
	}
	return false
}

func ours(name string) bool { return name == scoring.PluginFitPlus || name == scoring.PluginScarce }

func parseSchedulerConfig(doc map[string]json.RawMessage, schedulerName string) (scoring.Config, error) {
	var cfg scoring.Config
	raw, _ := json.Marshal(doc)
	var sc schedulerConfig
	if err := json.Unmarshal(raw, &sc); err != nil {
		return cfg, fmt.Errorf("%s: %w", kindSchedulerConfig, err)
	}
	var picked []int
	for i := range sc.Profiles {
		p := &sc.Profiles[i]
		if schedulerName != "" && p.SchedulerName == schedulerName || schedulerName == "" && p.usesOurs() {
			picked = append(picked, i)
		}
	}
	switch {
	case len(picked) == 0 && schedulerName != "":
		return cfg, fmt.Errorf("profiles: no profile with schedulerName %q", schedulerName)
	case len(picked) == 0:
		return cfg, fmt.Errorf("profiles: no profile configures %s or %s", scoring.PluginFitPlus, scoring.PluginScarce)
	case len(picked) > 1:
		return cfg, fmt.Errorf("profiles: %d profiles configure the scorer's plugins; choose one with --scheduler-name", len(picked))
	}
	i := picked[0]
	p := sc.Profiles[i]
	path := fmt.Sprintf("profiles[%d]", i)
	enabled := map[string]bool{}
	scoreSection := p.Plugins != nil && p.Plugins.Score != nil
	var errs []error
	if scoreSection {
		cfg.PluginWeights = map[string]int64{}
		for j, e := range p.Plugins.Score.Enabled {
			if !ours(e.Name) {
				continue
			}
			enabled[e.Name] = true
			if e.Weight != nil {
				if err := checkWeight(*e.Weight); err != nil {
					errs = append(errs, fmt.Errorf("%s.plugins.score.enabled[%d].weight: %w", path, j, err))
				}
				cfg.PluginWeights[e.Name] = *e.Weight
			}
		}
	}
	for j, pc := range p.PluginConfig {
		if !ours(pc.Name) || scoreSection && !enabled[pc.Name] {
			continue
		}
		apath := fmt.Sprintf("%s.pluginConfig[%d].args", path, j)
		switch pc.Name {
		case scoring.PluginFitPlus:
			errs = append(errs, parseFitArgs(pc.Args, apath, &cfg))
		case scoring.PluginScarce:
			errs = append(errs, parseScarceArgs(pc.Args, apath, &cfg))
		}
	}
	return cfg, errors.Join(errs...)
}
