package scoring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The wire forms of nodes and quantities shared by the scorer service's
// node bucket, its jq.api.v1.score queries and `jqctl nodes put`.

// ParseQuantity parses a Kubernetes quantity string, refusing what no real
// amount needs and apimachinery would take minutes over (an exponent beyond
// ±30 such as 1e-99999999, or an absurdly long string) and negative values.
func ParseQuantity(s string) (resource.Quantity, error) {
	if len(s) > 64 {
		return resource.Quantity{}, fmt.Errorf("invalid quantity %q: too long", s[:64]+"…")
	}
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(s[i+1:]); err == nil && (exp < -30 || exp > 30) {
			return resource.Quantity{}, fmt.Errorf("invalid quantity %q: exponent out of range", s)
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Errorf("invalid quantity %q", s)
	}
	if q.Sign() < 0 {
		return q, fmt.Errorf("must not be negative, got %q", s)
	}
	return q, nil
}

// Quantities is a ResourceList in JSON whose values go through
// ParseQuantity; a value may be a string or a bare number, as YAML writes
// small counts. Errors are relative to the field, to be prefixed with its
// path: `[cpu]: invalid quantity "x"`, `: want an object ...`.
type Quantities corev1.ResourceList

// QuantityError is a bad value in Quantities.
type QuantityError struct {
	Resource corev1.ResourceName
	Err      error
}

func (e *QuantityError) Error() string { return "[" + string(e.Resource) + "]: " + e.Err.Error() }
func (e *QuantityError) Unwrap() error { return e.Err }

// UnmarshalJSON implements json.Unmarshaler.
func (q *Quantities) UnmarshalJSON(data []byte) error {
	var raw map[corev1.ResourceName]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return errors.New(": want an object of resource name to quantity")
	}
	if raw == nil {
		*q = nil
		return nil
	}
	out := make(Quantities, len(raw))
	names := make([]corev1.ResourceName, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var s string
		if err := json.Unmarshal(raw[name], &s); err != nil {
			var n json.Number
			if json.Unmarshal(raw[name], &n) != nil {
				return &QuantityError{name, fmt.Errorf("want a quantity string, got %s", raw[name])}
			}
			s = n.String()
		}
		v, err := ParseQuantity(s)
		if err != nil {
			return &QuantityError{name, err}
		}
		out[name] = v
	}
	*q = out
	return nil
}

// NodeState is one node on the wire: its name, labels and taints, and its
// allocatable and already requested amounts, as SCORER.md's nodes[] entry
// spells them (requested without the incoming pod, cpu and memory
// including the 100m / 200Mi defaults of containers without them).
type NodeState struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
	Allocatable Quantities        `json:"allocatable,omitempty"`
	Requested   Quantities        `json:"requested,omitempty"`
}

// DecodeNodeState reads one node strictly: an unknown field, a bad
// quantity or a missing name is an error naming the field.
func DecodeNodeState(data []byte) (NodeState, error) {
	var raw struct {
		NodeState
		Allocatable json.RawMessage `json:"allocatable"`
		Requested   json.RawMessage `json:"requested"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&raw); err != nil {
		return NodeState{}, err
	}
	s := raw.NodeState
	if s.Name == "" {
		return s, errors.New("name: required")
	}
	for _, f := range []struct {
		path string
		raw  json.RawMessage
		dst  *Quantities
	}{{"allocatable", raw.Allocatable, &s.Allocatable}, {"requested", raw.Requested, &s.Requested}} {
		if f.raw == nil {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return s, fmt.Errorf("%s%w", f.path, err)
		}
	}
	return s, nil
}

// Node is the scoring view of the state.
func (s *NodeState) Node() Node {
	return Node{Name: s.Name, Labels: s.Labels, Taints: s.Taints,
		Allocatable: NewResources(corev1.ResourceList(s.Allocatable)),
		Requested:   NewResources(corev1.ResourceList(s.Requested))}
}
