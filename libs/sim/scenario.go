// Package sim runs conformance scenarios (shared/conformance/FORMAT.md) on
// the decision core with a fake clock: the same engine the services run,
// driven step by step, compared with each expect checkpoint.
package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jetqueue/jetqueue/libs/api"
)

// Start is the simulated clock's starting instant.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrMalformed marks a scenario that cannot be run as written.
var ErrMalformed = errors.New("malformed scenario")

// Scenario is one parsed scenario file.
type Scenario struct {
	Name          string
	Description   string
	Configuration *api.Configuration
	Objects       []api.Object
	Steps         []Step
}

// Step is one timeline entry; exactly one field is set.
type Step struct {
	Submit      []api.Object
	Apply       []api.Object
	Delete      []string
	Finish      []string
	PodsReady   []string
	SetPriority map[string]int32
	Advance     *time.Duration
	// Reject holds raw documents: each must fail to decode or validate.
	Reject []json.RawMessage
	Expect *Expect
}

// Expect is a checkpoint; a nil field is not checked.
type Expect struct {
	Admitted  map[string]map[string]map[string]string `json:"admitted"`
	Pending   *[]string                               `json:"pending"`
	Evicted   map[string]string                       `json:"evicted"`
	Inactive  *[]string                               `json:"inactive"`
	Finished  *[]string                               `json:"finished"`
	PodCounts map[string]map[string]int32             `json:"podCounts"`

	hasAdmitted, hasEvicted bool
}

type rawScenario struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	Configuration json.RawMessage   `json:"configuration"`
	Objects       []json.RawMessage `json:"objects"`
	Steps         []json.RawMessage `json:"steps"`
}

// fieldError is a malformed-scenario error naming where.
func fieldError(field string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, field, fmt.Sprintf(format, args...))
}

// Parse reads a scenario strictly: unknown keys, bad quantities and invalid
// objects are errors naming the step and field.
//
// A valid scenario is read in one pass (parseFast); one it does not take
// whole is read again by parseReference, which names the error.
func Parse(data []byte) (*Scenario, error) {
	if sc, err := parseFast(data); err == nil {
		return sc, nil
	}
	return parseReference(data)
}

// parseReference is the reading that names every error: the whole file as
// JSON text, then each part decoded from it.
func parseReference(data []byte) (*Scenario, error) {
	return parseWith(data, api.Decode)
}

// parseWith is parseReference with the manifest decoder given: the
// benchmark passes api.DecodeReference to time the reading of before the
// one decode.
func parseWith(data []byte, decode func([]byte) ([]api.Object, error)) (*Scenario, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fieldError("(file)", "%v", err)
	}
	return parseJSON(js, decode)
}

// parseJSON reads a scenario from its JSON text.
func parseJSON(js []byte, decode func([]byte) ([]api.Object, error)) (*Scenario, error) {
	var raw rawScenario
	if err := strictJSON(js, &raw); err != nil {
		return nil, fieldError("(top level)", "%v", err)
	}
	if raw.Name == "" {
		return nil, fieldError("name", "required")
	}
	sc := &Scenario{Name: raw.Name, Description: raw.Description}
	if len(raw.Configuration) > 0 && string(raw.Configuration) != "null" {
		cfg, err := parseConfiguration(raw.Configuration, decode)
		if err != nil {
			return nil, err
		}
		sc.Configuration = cfg
	}
	for i, o := range raw.Objects {
		objs, err := decodeValid(o, decode)
		if err != nil {
			return nil, fieldError(fmt.Sprintf("objects[%d]", i), "%v", err)
		}
		sc.Objects = append(sc.Objects, objs...)
	}
	for i, s := range raw.Steps {
		st, err := parseStep(s, decode)
		if err != nil {
			return nil, fmt.Errorf("steps[%d].%w", i, err)
		}
		sc.Steps = append(sc.Steps, st)
	}
	return sc, nil
}

// parseConfiguration reads the configuration block: Kueue's Configuration
// without its apiVersion and kind.
func parseConfiguration(js json.RawMessage, decode func([]byte) ([]api.Object, error)) (*api.Configuration, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, fieldError("configuration", "want a map: %v", err)
	}
	m["apiVersion"] = json.RawMessage(`"` + api.ConfigAPIVersion + `"`)
	m["kind"] = json.RawMessage(`"` + api.KindConfiguration + `"`)
	doc, _ := json.Marshal(m)
	objs, err := decodeValid(doc, decode)
	if err != nil {
		return nil, fieldError("configuration", "%v", err)
	}
	return objs[0].(*api.Configuration), nil
}

func strictJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// decodeValid decodes and validates one manifest document.
func decodeValid(doc []byte, decode func([]byte) ([]api.Object, error)) ([]api.Object, error) {
	objs, err := decode(doc)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := api.Validate(o); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func parseStep(data json.RawMessage, decode func([]byte) ([]api.Object, error)) (Step, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return Step{}, fmt.Errorf("%w: step must be a map with one key: %v", ErrMalformed, err)
	}
	if len(m) != 1 {
		return Step{}, fmt.Errorf("%w: step must have exactly one key, has %d", ErrMalformed, len(m))
	}
	var st Step
	for key, v := range m {
		bad := func(err error) error { return fmt.Errorf("%s: %w", key, err) }
		switch key {
		case "submit", "apply":
			var docs []json.RawMessage
			if err := json.Unmarshal(v, &docs); err != nil {
				return st, bad(fmt.Errorf("%w: want a list of manifests: %v", ErrMalformed, err))
			}
			var objs []api.Object
			for i, d := range docs {
				decoded, err := decode(d)
				if err != nil {
					return st, fmt.Errorf("%s[%d]: %w: %v", key, i, ErrMalformed, err)
				}
				objs = append(objs, decoded...)
			}
			if key == "submit" {
				st.Submit = objs
			} else {
				st.Apply = objs
			}
		case "delete", "finish", "podsReady":
			var keys []string
			if err := strictJSON(v, &keys); err != nil {
				return st, bad(fmt.Errorf("%w: want a list of namespace/name: %v", ErrMalformed, err))
			}
			for i, k := range keys {
				if !validKey(k) {
					return st, fmt.Errorf("%s[%d]: %w: %q is not namespace/name", key, i, ErrMalformed, k)
				}
			}
			switch key {
			case "delete":
				st.Delete = keys
			case "finish":
				st.Finish = keys
			default:
				st.PodsReady = keys
			}
		case "setPriority":
			if err := strictJSON(v, &st.SetPriority); err != nil {
				return st, bad(fmt.Errorf("%w: want a map of namespace/name to integer: %v", ErrMalformed, err))
			}
		case "advance":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return st, bad(fmt.Errorf("%w: want a duration such as 6m: %v", ErrMalformed, err))
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return st, bad(fmt.Errorf("%w: %q is not a non-negative duration", ErrMalformed, s))
			}
			st.Advance = &d
		case "reject":
			if err := json.Unmarshal(v, &st.Reject); err != nil {
				return st, bad(fmt.Errorf("%w: want a list of manifests: %v", ErrMalformed, err))
			}
			for i, m := range st.Reject {
				st.Reject[i] = canonicalJSON(m)
			}
		case "expect":
			var ex Expect
			if err := strictJSON(v, &ex); err != nil {
				return st, bad(fmt.Errorf("%w: %v", ErrMalformed, err))
			}
			var present map[string]json.RawMessage
			_ = json.Unmarshal(v, &present)
			_, ex.hasAdmitted = present["admitted"]
			_, ex.hasEvicted = present["evicted"]
			st.Expect = &ex
		default:
			return st, fmt.Errorf("%s: %w: unknown step", key, ErrMalformed)
		}
	}
	return st, nil
}

// canonicalJSON writes a manifest with its keys sorted, as sigs.k8s.io/yaml
// writes every file, so that a rejected manifest reads the same whichever
// way its file was read (its bytes go to the API as they are).
func canonicalJSON(m json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(m))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return m
	}
	out, err := json.Marshal(v)
	if err != nil {
		return m
	}
	return out
}

func validKey(k string) bool {
	i := bytes.IndexByte([]byte(k), '/')
	return i > 0 && i < len(k)-1 && bytes.Count([]byte(k), []byte("/")) == 1
}
