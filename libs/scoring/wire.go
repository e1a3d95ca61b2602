package scoring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The wire form of SCORER.md's config, pod and nodes, shared by `jqctl
// score` and the scorer service's jq.api.v1.score queries, so that a vector
// decodes (and fails) the same way in both.

// WireError names the field of a decoding problem: "pod.requests[cpu]:
// invalid quantity".
type WireError struct {
	Field  string
	Detail string
}

func (e *WireError) Error() string { return e.Field + ": " + e.Detail }

func wireErr(field, format string, args ...any) error {
	return &WireError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// Object decodes a JSON object whose keys must be among allowed (any key
// when allowed is empty), so that a misspelt field cannot go unchecked. An
// absent value is an empty object.
func Object(raw json.RawMessage, path string, allowed ...string) (map[string]json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, wireErr(path, "want an object")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(allowed) > 0 && !slices.Contains(allowed, k) {
			return nil, wireErr(join(path, k), "unknown field")
		}
	}
	return m, nil
}

// Value decodes one field strictly; an absent one leaves v as it is.
func Value(raw json.RawMessage, path string, v any) error {
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return wireErr(path, "want %s, got %s", kindName(te.Type.Kind()), te.Value)
		}
		return wireErr(path, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	}
	return "a " + k.String()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// DecodeConfig reads SCORER.md's config, naming fields as Validate does
// (config.fitPlus[cpu].weight). An absent config is the zero Config.
func DecodeConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	top, err := Object(raw, "config", "fitPlus", "scarce", "pluginWeights")
	if raw == nil || err != nil {
		return cfg, err
	}
	if top["fitPlus"] != nil {
		fit, err := Object(top["fitPlus"], "config.fitPlus")
		if err != nil {
			return cfg, err
		}
		cfg.FitPlus = make(map[corev1.ResourceName]ResourcesType, len(fit))
		for _, name := range slices.Sorted(maps.Keys(fit)) {
			path := fmt.Sprintf("config.fitPlus[%s]", name)
			e, err := Object(fit[name], path, "type", "weight")
			if err != nil {
				return cfg, err
			}
			var rt ResourcesType
			if err := Value(e["type"], path+".type", &rt.Type); err != nil {
				return cfg, err
			}
			if err := Value(e["weight"], path+".weight", &rt.Weight); err != nil {
				return cfg, err
			}
			cfg.FitPlus[corev1.ResourceName(name)] = rt
		}
	}
	if err := Value(top["scarce"], "config.scarce", &cfg.Scarce); err != nil {
		return cfg, err
	}
	if top["pluginWeights"] != nil {
		pw, err := Object(top["pluginWeights"], "config.pluginWeights")
		if err != nil {
			return cfg, err
		}
		cfg.PluginWeights = make(map[string]int64, len(pw))
		for _, name := range slices.Sorted(maps.Keys(pw)) {
			var w int64
			if err := Value(pw[name], fmt.Sprintf("config.pluginWeights[%s]", name), &w); err != nil {
				return cfg, err
			}
			cfg.PluginWeights[name] = w
		}
	}
	return cfg, nil
}

// DecodePod reads SCORER.md's pod: requests, and optional containers whose
// keys decide the cpu/memory defaults. An absent pod is the zero Pod.
func DecodePod(raw json.RawMessage) (Pod, error) {
	var pod Pod
	m, err := Object(raw, "pod", "requests", "containers")
	if raw == nil || err != nil {
		return pod, err
	}
	if pod.Requests, err = decodeQuantities(m["requests"], "pod.requests"); err != nil {
		return pod, err
	}
	if m["containers"] == nil {
		return pod, nil
	}
	var containers []json.RawMessage
	if err := Value(m["containers"], "pod.containers", &containers); err != nil {
		return pod, err
	}
	pod.Containers = make([]Resources, len(containers))
	for i, c := range containers {
		path := fmt.Sprintf("pod.containers[%d]", i)
		cm, err := Object(c, path, "name", "requests")
		if err != nil {
			return pod, err
		}
		if pod.Containers[i], err = decodeQuantities(cm["requests"], path+".requests"); err != nil {
			return pod, err
		}
	}
	return pod, nil
}

func decodeQuantities(raw json.RawMessage, path string) (Resources, error) {
	if raw == nil {
		return Resources{}, nil
	}
	var q Quantities
	if err := json.Unmarshal(raw, &q); err != nil {
		if qe := (*QuantityError)(nil); errors.As(err, &qe) {
			return nil, wireErr(fmt.Sprintf("%s[%s]", path, qe.Resource), "%s", qe.Err.Error())
		}
		return nil, wireErr(path, "%s", strings.TrimPrefix(err.Error(), ": "))
	}
	return NewResources(corev1.ResourceList(q)), nil
}

// DecodeNodes reads SCORER.md's nodes (plus labels and taints, as the
// scorer's node bucket holds them); an entry's pods (what requested was
// derived from) are accepted and not re-derived. Names must be unique.
func DecodeNodes(raw json.RawMessage) ([]Node, error) {
	var list []json.RawMessage
	if err := Value(raw, "nodes", &list); err != nil {
		return nil, wireErr("nodes", "want a list of nodes")
	}
	nodes := make([]Node, len(list))
	seen := map[string]int{}
	for i, n := range list {
		path := fmt.Sprintf("nodes[%d]", i)
		m, err := Object(n, path, "name", "labels", "taints", "allocatable", "requested", "pods")
		if err != nil {
			return nil, err
		}
		node := &nodes[i]
		if err := Value(m["name"], path+".name", &node.Name); err != nil {
			return nil, err
		}
		if node.Name == "" {
			return nil, wireErr(path+".name", "required")
		}
		if j, dup := seen[node.Name]; dup {
			return nil, wireErr(path+".name", "%q already names nodes[%d]", node.Name, j)
		}
		seen[node.Name] = i
		if err := Value(m["labels"], path+".labels", &node.Labels); err != nil {
			return nil, err
		}
		if err := Value(m["taints"], path+".taints", &node.Taints); err != nil {
			return nil, err
		}
		if node.Allocatable, err = decodeQuantities(m["allocatable"], path+".allocatable"); err != nil {
			return nil, err
		}
		if node.Requested, err = decodeQuantities(m["requested"], path+".requested"); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}
