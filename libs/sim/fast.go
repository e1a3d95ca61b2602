package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/yamljson"
)

// errSlow makes Parse read the scenario again with parseReference.
var errSlow = errors.New("sim: not for the fast path")

// parseFast reads a scenario without sigs.k8s.io/yaml's generic map. A
// file in the block style yamljson reads becomes JSON text in one pass and
// is read as the reference reads its JSON. Any other file goes through
// yaml.v2's ordered node list: each manifest of objects, submit and apply
// is written out as JSON and decoded by api.Decode (its own fast path), and
// the small steps go through parseStep on JSON written exactly as the
// reference writes it. It gives up (errSlow) at the first doubt, so every
// error is named by parseReference; a scenario it accepts, the reference
// accepts as the same Scenario (TestParseFastAgrees).
func parseFast(data []byte) (*Scenario, error) {
	// Block YAML's JSON is shorter than the YAML (no indentation): one
	// buffer of the input's size, instead of growing one by doubling
	// (about 12 MB of copies on the 8 MB scenario of bench-vs-kueue).
	if js, err := yamljson.Append(make([]byte, 0, len(data)), data); err == nil && len(js) > 0 {
		// The one pass: the JSON text the reference would read (but for
		// the order of keys, which no decoder here depends on), read as
		// the reference reads it.
		return parseFastJSON(js)
	}
	if bytes.Contains(data, []byte("<<")) {
		return nil, errSlow // YAML merge keys: the reference merges them
	}
	var root goyaml.MapSlice
	if err := goyaml.Unmarshal(data, &root); err != nil || root == nil {
		return nil, errSlow
	}
	top, err := lastWins(root)
	if err != nil {
		return nil, err
	}
	sc := &Scenario{}
	var buf []byte
	for _, item := range top {
		switch item.Key {
		case "name", "description":
			var s string
			switch v := item.Value.(type) {
			case string:
				s = v
			case nil:
			default:
				return nil, errSlow
			}
			if item.Key == "name" {
				sc.Name = s
			} else {
				sc.Description = s
			}
		case "configuration":
			if item.Value == nil {
				continue
			}
			js, err := referenceJSON(item.Value)
			if err != nil {
				return nil, err
			}
			if sc.Configuration, err = parseConfiguration(js, api.Decode); err != nil {
				return nil, errSlow
			}
		case "objects":
			list, ok := item.Value.([]interface{})
			if !ok && item.Value != nil {
				return nil, errSlow
			}
			for _, o := range list {
				var objs []api.Object
				if objs, buf, err = decodeManifest(buf, o); err != nil {
					return nil, errSlow
				}
				for _, obj := range objs {
					if api.Validate(obj) != nil {
						return nil, errSlow
					}
				}
				sc.Objects = append(sc.Objects, objs...)
			}
		case "steps":
			list, ok := item.Value.([]interface{})
			if !ok && item.Value != nil {
				return nil, errSlow
			}
			for _, s := range list {
				var st Step
				if st, buf, err = fastStep(buf, s); err != nil {
					return nil, errSlow
				}
				sc.Steps = append(sc.Steps, st)
			}
		default:
			return nil, errSlow
		}
	}
	if sc.Name == "" {
		return nil, errSlow
	}
	return sc, nil
}

// fastScenario is rawScenario for encoding/json/v2, which splits the text
// into its parts in one scan (strictly: unknown and duplicate names, and
// names in another case, are errors, and so go to the reference).
type fastScenario struct {
	Name          string                      `json:"name"`
	Description   string                      `json:"description"`
	Configuration jsontext.Value              `json:"configuration"`
	Objects       []jsontext.Value            `json:"objects"`
	Steps         []map[string]jsontext.Value `json:"steps"`
}

// parseFastJSON is parseJSON for the JSON text yamljson wrote: submit and
// apply manifests go to api.Decode one by one, the other steps through
// parseStep.
func parseFastJSON(js []byte) (*Scenario, error) {
	var raw fastScenario
	if err := jsonv2.Unmarshal(js, &raw, jsonv2.RejectUnknownMembers(true)); err != nil || raw.Name == "" {
		return nil, errSlow
	}
	sc := &Scenario{Name: raw.Name, Description: raw.Description}
	if len(raw.Configuration) > 0 && string(raw.Configuration) != "null" {
		cfg, err := parseConfiguration(json.RawMessage(raw.Configuration), api.Decode)
		if err != nil {
			return nil, errSlow
		}
		sc.Configuration = cfg
	}
	for _, o := range raw.Objects {
		objs, err := decodeValid(o, api.Decode)
		if err != nil {
			return nil, errSlow
		}
		sc.Objects = append(sc.Objects, objs...)
	}
	for _, m := range raw.Steps {
		if len(m) != 1 {
			return nil, errSlow
		}
		for key, v := range m {
			var st Step
			switch key {
			case "submit", "apply":
				var docs []jsontext.Value
				if err := jsonv2.Unmarshal(v, &docs); err != nil {
					return nil, errSlow
				}
				var objs []api.Object
				for _, d := range docs {
					decoded, err := api.Decode(d)
					if err != nil {
						return nil, errSlow
					}
					objs = append(objs, decoded...)
				}
				if key == "submit" {
					st.Submit = objs
				} else {
					st.Apply = objs
				}
			default:
				step, err := json.Marshal(map[string]json.RawMessage{key: json.RawMessage(v)})
				if err != nil {
					return nil, errSlow
				}
				if st, err = parseStep(step, api.Decode); err != nil {
					return nil, errSlow
				}
			}
			sc.Steps = append(sc.Steps, st)
		}
	}
	return sc, nil
}

// fastStep reads one step: submit and apply manifest by manifest, the
// rest through parseStep.
func fastStep(buf []byte, v interface{}) (Step, []byte, error) {
	ms, ok := v.(goyaml.MapSlice)
	if !ok {
		return Step{}, buf, errSlow
	}
	items, err := lastWins(ms)
	if err != nil || len(items) != 1 {
		return Step{}, buf, errSlow
	}
	key := items[0].Key
	if key != "submit" && key != "apply" {
		js, err := referenceJSON(ms)
		if err != nil {
			return Step{}, buf, err
		}
		st, err := parseStep(js, api.Decode)
		if err != nil {
			return Step{}, buf, errSlow
		}
		return st, buf, nil
	}
	list, ok := items[0].Value.([]interface{})
	if !ok || list == nil {
		return Step{}, buf, errSlow
	}
	var objs []api.Object
	for _, m := range list {
		var decoded []api.Object
		if decoded, buf, err = decodeManifest(buf, m); err != nil {
			return Step{}, buf, errSlow
		}
		objs = append(objs, decoded...)
	}
	var st Step
	if key == "submit" {
		st.Submit = objs
	} else {
		st.Apply = objs
	}
	return st, buf, nil
}

// decodeManifest writes one manifest node as JSON into buf and decodes it.
func decodeManifest(buf []byte, v interface{}) ([]api.Object, []byte, error) {
	if _, ok := v.(goyaml.MapSlice); !ok {
		return nil, buf, errSlow
	}
	js, err := api.AppendYAMLAsJSON(buf[:0], v)
	if err != nil {
		return nil, buf, errSlow
	}
	objs, err := api.Decode(js)
	return objs, js, err
}

// lastWins drops every key but the last of its name (yaml.v2's maps keep
// the last value, and so does the reference); a key that is not a string
// goes to the reference.
func lastWins(ms goyaml.MapSlice) ([]goyaml.MapItem, error) {
	seen := make(map[string]bool, len(ms))
	out := make([]goyaml.MapItem, 0, len(ms))
	for i := len(ms) - 1; i >= 0; i-- {
		k, ok := ms[i].Key.(string)
		if !ok {
			return nil, errSlow
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, goyaml.MapItem{Key: k, Value: ms[i].Value})
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// referenceJSON writes a node as sigs.k8s.io/yaml writes it (a generic
// value through encoding/json: sorted keys, the same escapes), so the
// small steps read the very bytes the reference reads.
func referenceJSON(v interface{}) ([]byte, error) {
	g, err := generic(v, 0)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(g)
	if err != nil {
		return nil, errSlow
	}
	return js, nil
}

func generic(v interface{}, depth int) (interface{}, error) {
	if depth > 10000 {
		return nil, errSlow
	}
	switch t := v.(type) {
	case goyaml.MapSlice:
		m := make(map[string]interface{}, len(t))
		for _, item := range t {
			var k string
			switch key := item.Key.(type) {
			case string:
				k = key
			case int:
				k = fmt.Sprint(key)
			default:
				return nil, errSlow
			}
			g, err := generic(item.Value, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = g
		}
		return m, nil
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			g, err := generic(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = g
		}
		return out, nil
	}
	return v, nil
}
