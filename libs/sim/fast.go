package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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

// parseFastJSON is parseJSON for the JSON text yamljson wrote, read in
// one scan with a jsontext.Decoder over js itself: each manifest is a
// slice of js, handed to api.Decode (submit and apply) or decodeValid
// (objects, configuration) without a copy; the other steps go through
// parseStep. It is strict as the reference is, or gives up (errSlow):
// an unknown or duplicate name, a value of another kind.
func parseFastJSON(js []byte) (*Scenario, error) {
	d := fastJSON{dec: jsontext.NewDecoder(bytes.NewBuffer(js)), js: js}
	sc := &Scenario{}
	err := d.object(func(name string) error {
		switch name {
		case "name":
			return d.str(&sc.Name)
		case "description":
			return d.str(&sc.Description)
		case "configuration":
			v, err := d.value()
			if err != nil || v == nil {
				return err
			}
			sc.Configuration, err = parseConfiguration(json.RawMessage(v), api.Decode)
			return err
		case "objects":
			return d.array(func() error {
				v, err := d.value()
				if err != nil {
					return err
				}
				objs, err := decodeValid(v, api.Decode)
				sc.Objects = append(sc.Objects, objs...)
				return err
			})
		case "steps":
			return d.array(func() error {
				st, err := d.step()
				sc.Steps = append(sc.Steps, st)
				return err
			})
		}
		return errSlow
	})
	if err != nil || sc.Name == "" {
		return nil, errSlow
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return nil, errSlow
	}
	return sc, nil
}

// fastJSON reads the parts of a scenario's JSON text.
type fastJSON struct {
	dec *jsontext.Decoder
	js  []byte
}

// value is the next value as a slice of the text; nil for null.
func (d *fastJSON) value() ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if v.Kind() == 'n' {
		return nil, nil
	}
	end := int(d.dec.InputOffset())
	return d.js[end-len(v) : end : end], nil
}

// str reads a string, or null as "".
func (d *fastJSON) str(s *string) error {
	tok, err := d.dec.ReadToken()
	switch {
	case err != nil:
		return err
	case tok.Kind() == '"':
		*s = tok.String()
	case tok.Kind() != 'n':
		return errSlow
	}
	return nil
}

// object reads an object (or null), calling each for every name; each
// reads the name's value.
func (d *fastJSON) object(each func(name string) error) error {
	return d.composite('{', '}', func() error {
		name, err := d.dec.ReadToken()
		if err != nil {
			return err
		}
		return each(name.String())
	})
}

// array reads an array (or null), calling each for every element; each
// reads the element.
func (d *fastJSON) array(each func() error) error { return d.composite('[', ']', each) }

// composite reads an object or an array (or null), from open to end,
// calling each until end is next.
func (d *fastJSON) composite(open, end jsontext.Kind, each func() error) error {
	tok, err := d.dec.ReadToken()
	if err != nil || tok.Kind() == 'n' {
		return err
	}
	if tok.Kind() != open {
		return errSlow
	}
	for d.dec.PeekKind() != end {
		if err := each(); err != nil {
			return err
		}
	}
	_, err = d.dec.ReadToken()
	return err
}

// step reads one step: a map of exactly one key. Submit and apply are
// decoded manifest by manifest, the rest through parseStep.
func (d *fastJSON) step() (Step, error) {
	var st Step
	keys := 0
	err := d.object(func(key string) error {
		if keys++; keys > 1 {
			return errSlow
		}
		if key != "submit" && key != "apply" {
			v, err := d.value()
			if err != nil || v == nil {
				return errSlow
			}
			step, err := json.Marshal(map[string]json.RawMessage{key: json.RawMessage(v)})
			if err != nil {
				return errSlow
			}
			st, err = parseStep(step, api.Decode)
			return err
		}
		if d.dec.PeekKind() != '[' {
			return errSlow
		}
		var objs []api.Object
		err := d.array(func() error {
			v, err := d.value()
			if err != nil || v == nil {
				return errSlow
			}
			decoded, err := api.Decode(v)
			objs = append(objs, decoded...)
			return err
		})
		if key == "submit" {
			st.Submit = objs
		} else {
			st.Apply = objs
		}
		return err
	})
	if err == nil && keys != 1 {
		err = errSlow
	}
	return st, err
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
