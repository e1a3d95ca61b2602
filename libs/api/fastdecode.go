package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/jetqueue/jetqueue/libs/yamljson"
)

// The one decode.
//
// Each document is read once: YAML by yaml.v2 into an ordered node list,
// written straight out as JSON text (no generic map, no sorting, no
// reflection), and JSON by one strict, typed, streaming pass of
// encoding/json/v2 (github.com/go-json-experiment/json) into the Go type its
// kind selects, with the quantity bounds applied to each quantity's text as
// it is read. A cheap byte scan before it refuses the rest of what the
// limits forbid (control characters, invalid UTF-8).
//
// The fast path is an accelerator, never a judge: it accepts a request only
// when every document decodes cleanly, and gives up (errSlow) at the first
// doubt: a syntax or type error, an unknown or duplicate field, a string
// that may hold a control character, a quantity over its bounds, a kind or
// apiVersion it does not take, YAML merge keys, too many objects. The
// request is then decoded again by decodeReference, which names every error
// with its field path exactly as before. FuzzDecode checks that whatever the
// fast path accepts, the reference accepts too and decodes to the same
// objects.

// errSlow makes the fast path hand the request to decodeReference.
var errSlow = errors.New("api: not for the fast path")

// fastOptions: strict (unknown members refused; duplicate names and
// invalid UTF-8 are refused by default in v2; names match case-sensitively
// as sigs.k8s.io/json's strict mode does), with the quantity bounds.
var fastOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(unmarshalQuantity)),
)

// unmarshalQuantity applies checkQuantity's bounds to the text of a
// quantity before resource.ParseQuantity sees it.
func unmarshalQuantity(dec *jsontext.Decoder, q *resource.Quantity) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	text := []byte(raw)
	switch raw.Kind() {
	case '"':
		text = raw[1 : len(raw)-1]
		if bytes.IndexByte(text, '\\') >= 0 {
			// Quantity.UnmarshalJSON reads the text as it is written, and
			// no quantity holds a backslash: the reference names the error.
			return errSlow
		}
	case '0':
	default: // null, objects and the like: the reference decides
		return errSlow
	}
	if len(text) <= MaxQuantityLength && bytes.IndexAny(text, "eE") < 0 {
		return q.UnmarshalJSON(raw) // within bounds: no exponent to read
	}
	if quantityOverBounds(string(text)) {
		return errSlow
	}
	return q.UnmarshalJSON(raw)
}

// quantityOverBounds mirrors stringWalker.checkQuantity.
func quantityOverBounds(s string) bool {
	if len(s) > MaxQuantityLength {
		return true
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 || i+1 >= len(s) || s[i+1] == 'i' {
		return false
	}
	exp, err := strconv.Atoi(s[i+1:])
	return err == nil && (exp > MaxQuantityExponent || exp < -MaxQuantityExponent)
}

// mayHoldControl reports whether JSON text may hold, in some string or key,
// a character the limits forbid: invalid UTF-8, DEL or a C1 control written
// raw, or any escape that can spell a control character (\b, \f, \uXXXX).
// Raw C0 controls are not valid JSON inside strings. It is conservative: a
// false alarm only sends the request to the reference decode.
func mayHoldControl(js []byte) bool {
	if !utf8.Valid(js) || bytes.IndexByte(js, 0x7f) >= 0 {
		return true
	}
	for rest := js; ; {
		i := bytes.IndexByte(rest, 0xc2)
		if i < 0 || i+1 >= len(rest) {
			break
		}
		if rest[i+1] >= 0x80 && rest[i+1] <= 0x9f {
			return true
		}
		rest = rest[i+1:]
	}
	for rest := js; ; {
		i := bytes.IndexByte(rest, '\\')
		if i < 0 || i+1 >= len(rest) {
			return false
		}
		switch rest[i+1] {
		case 'b', 'f', 'u':
			return true
		}
		rest = rest[i+2:]
	}
}

// fastDecoder holds the state of one fast decode.
type fastDecoder struct {
	opts  DecodeOptions
	objs  []Object
	count int
}

func (f *fastDecoder) admit() error {
	f.count++
	if f.count > MaxDocuments {
		return errSlow
	}
	return nil
}

// fastDecode decodes data or answers errSlow.
func fastDecode(data []byte, o DecodeOptions) ([]Object, error) {
	f := fastDecoder{opts: o}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		// JSON, or YAML that looks like it: the reference tells them apart.
		if err := f.jsonDocument(trimmed); err != nil {
			return nil, errSlow
		}
		return f.objs, nil
	}
	if bytes.Contains(data, []byte("<<")) {
		return nil, errSlow // YAML merge keys: the reference merges them
	}
	var buf []byte
	for _, doc := range yamlDocuments(data) {
		if plainScalar(doc) {
			return nil, errSlow // refused there without a parse
		}
		js, err := yamlToJSON(buf[:0], doc)
		if err != nil {
			return nil, errSlow
		}
		buf = js
		if len(js) == 0 {
			continue // an empty document
		}
		if err := f.object(js, true); err != nil {
			return nil, errSlow
		}
	}
	return f.objs, nil
}

// jsonDocument handles one JSON document: an object or an array of them.
func (f *fastDecoder) jsonDocument(js []byte) error {
	if mayHoldControl(js) {
		return errSlow
	}
	if js[0] == '{' {
		return f.object(js, true)
	}
	var items []jsontext.Value
	if err := jsonv2.Unmarshal(js, &items); err != nil {
		return errSlow
	}
	return f.items(items)
}

func (f *fastDecoder) items(items []jsontext.Value) error {
	for _, it := range items {
		if it.Kind() != '{' {
			return errSlow
		}
		if err := f.object(it, false); err != nil {
			return err
		}
	}
	return nil
}

// fastList is a `kind: List`, strictly.
type fastList struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   jsontext.Value   `json:"metadata"`
	Items      []jsontext.Value `json:"items"`
}

// object decodes one JSON object (already free of forbidden characters).
func (f *fastDecoder) object(js []byte, allowList bool) error {
	if mayHoldControl(js) {
		return errSlow
	}
	h, ok := scanHead(js)
	if !ok {
		return errSlow
	}
	if h.kind == "List" {
		if !allowList || (h.apiVersion != "" && h.apiVersion != "v1") {
			return errSlow
		}
		var l fastList
		if err := jsonv2.Unmarshal(js, &l, jsonv2.RejectUnknownMembers(true)); err != nil {
			return errSlow
		}
		return f.items(l.Items)
	}
	if err := f.admit(); err != nil {
		return err
	}
	target, ok := decodeTarget(h.kind, h.apiVersion)
	if !ok {
		return errSlow
	}
	if readBackKinds[h.kind] && h.serverFields {
		return errSlow // dropServerFields' work: the reference does it
	}
	if h.status {
		return errSlow // status: dropped by the reference, or refused
	}
	if _, ok := target.(*Workload); ok {
		// The common Workload is read by hand (fastworkload.go), any other
		// by the typed decode.
		if read, ok := readWorkload(js); ok {
			target = read
		} else if err := jsonv2.Unmarshal(js, target, fastOptions); err != nil {
			return errSlow
		}
	} else if err := jsonv2.Unmarshal(js, target, fastOptions); err != nil {
		return errSlow
	}
	// The decode read kind and apiVersion again: they must be what the
	// scan chose the type by.
	if !typeMetaIs(target, h.kind, h.apiVersion) {
		return errSlow
	}
	obj, ferr := convert(target)
	if ferr != nil {
		return errSlow
	}
	setDefaultNamespace(obj, f.opts.DefaultNamespace)
	Default(obj)
	f.objs = append(f.objs, obj)
	return nil
}

// typeMetaIs reports whether a decoded target's kind and apiVersion are
// kind and apiVersion.
func typeMetaIs(target any, kind, apiVersion string) bool {
	o, ok := target.(interface{ GetObjectKind() schema.ObjectKind })
	if !ok {
		return false
	}
	m, ok := o.GetObjectKind().(*metav1.TypeMeta)
	return ok && m.Kind == kind && m.APIVersion == apiVersion
}

// headString is string(s), without a copy for the kinds and apiVersions
// jetqueue takes.
func headString(s []byte) string {
	switch string(s) {
	case KueueAPIVersion:
		return KueueAPIVersion
	case KueueV1beta2APIVersion:
		return KueueV1beta2APIVersion
	case ConfigAPIVersion:
		return ConfigAPIVersion
	case ConfigV1beta2APIVersion:
		return ConfigV1beta2APIVersion
	case SchedulingAPIVersion:
		return SchedulingAPIVersion
	case BatchAPIVersion:
		return BatchAPIVersion
	case "v1":
		return "v1"
	case KindResourceFlavor:
		return KindResourceFlavor
	case KindClusterQueue:
		return KindClusterQueue
	case KindLocalQueue:
		return KindLocalQueue
	case KindWorkloadPriorityClass:
		return KindWorkloadPriorityClass
	case KindPriorityClass:
		return KindPriorityClass
	case KindWorkload:
		return KindWorkload
	case KindJob:
		return KindJob
	case KindConfiguration:
		return KindConfiguration
	case "List":
		return "List"
	}
	return string(s)
}

// fastHead is what selects the type, read by scanHead.
type fastHead struct {
	apiVersion, kind string
	// status: the object has a top-level status member.
	status bool
	// serverFields: some member, at any depth, is named status or one of
	// serverMetadata, so dropServerFields may have work to do. A false
	// alarm only costs the reference decode.
	serverFields bool
}

// scanHead reads, in one pass over the text of a JSON object and without
// decoding it, the top-level apiVersion and kind and the member names that
// send a document to the reference (fastHead). It trusts the text to be
// valid JSON: the strict decode that follows refuses any that is not, and
// typeMetaIs checks that kind and apiVersion are what the scan read. ok is
// false when apiVersion or kind is repeated or not a plain string (no
// escapes), when a member name holds an escape, or when the nesting is over
// 64 deep: the reference decides those.
func scanHead(js []byte) (h fastHead, ok bool) {
	const maxDepth = 64
	var inObject uint64 // bit d-1: the container at depth d is an object
	depth := 0
	wantKey := false
	var pending *string // the top-level member whose string value comes next
	var seenKind, seenAPIVersion bool
	for i := 0; i < len(js); i++ {
		switch c := js[i]; c {
		case ' ', '\t', '\n', '\r', ':':
		case '{', '[':
			if pending != nil || depth == maxDepth {
				return h, false
			}
			depth++
			if c == '{' {
				inObject |= 1 << (depth - 1)
			} else {
				inObject &^= 1 << (depth - 1)
			}
			wantKey = c == '{'
		case '}', ']':
			if pending != nil {
				return h, false
			}
			depth--
			if depth <= 0 {
				return h, depth == 0
			}
			wantKey = false
		case ',':
			if pending != nil || depth <= 0 {
				return h, false
			}
			wantKey = inObject&(1<<(depth-1)) != 0
		case '"':
			j, escaped := i+1, false
			for j < len(js) && js[j] != '"' {
				if js[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(js) {
				return h, false
			}
			s := js[i+1 : j]
			i = j
			if wantKey {
				wantKey = false
				if escaped {
					return h, false
				}
				switch string(s) {
				case "status":
					h.serverFields = true
					h.status = h.status || depth == 1
				case "resourceVersion", "creationTimestamp", "generation", "managedFields",
					"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds":
					h.serverFields = true
				case "kind":
					if depth == 1 {
						if seenKind {
							return h, false
						}
						seenKind, pending = true, &h.kind
					}
				case "apiVersion":
					if depth == 1 {
						if seenAPIVersion {
							return h, false
						}
						seenAPIVersion, pending = true, &h.apiVersion
					}
				}
				continue
			}
			if pending != nil {
				if escaped {
					return h, false
				}
				*pending = headString(s)
				pending = nil
			}
		default: // numbers, true, false, null
			if pending != nil {
				return h, false
			}
		}
	}
	return h, false
}

// yamlToJSON appends the JSON text of one YAML document to dst: nothing
// for an empty document. It is sigs.k8s.io/yaml's YAMLToJSONStrict for
// documents whose root is a mapping, written without the generic map; any
// other document, a duplicate key, or a key or value sigs.k8s.io/yaml would
// refuse is errSlow.
func yamlToJSON(dst []byte, doc []byte) ([]byte, error) {
	if js, err := yamljson.Append(dst, doc); err == nil {
		return js, nil // the block style, in one pass
	}
	var root goyaml.MapSlice
	if err := goyaml.Unmarshal(doc, &root); err != nil {
		return nil, errSlow
	}
	if root == nil {
		if !isNullDocument(doc) {
			return nil, errSlow // `{}` and the like: the reference decides
		}
		return dst, nil
	}
	return appendYAML(dst, root, true, 0)
}

// isNullDocument reports whether a YAML document holds no value or null, as
// the reference treats it (skipped).
func isNullDocument(doc []byte) bool {
	var v interface{}
	return goyaml.Unmarshal(doc, &v) == nil && v == nil
}

// maxYAMLDepth is encoding/json's nesting limit, which the reference meets
// when it writes the JSON out.
const maxYAMLDepth = 10000

// appendYAML writes v as encoding/json.Marshal would write the value
// sigs.k8s.io/yaml builds from it. strict refuses duplicate keys; without
// it the last one wins, as in yaml.v2's maps.
func appendYAML(dst []byte, v interface{}, strict bool, depth int) ([]byte, error) {
	if depth > maxYAMLDepth {
		return nil, errSlow
	}
	switch t := v.(type) {
	case goyaml.MapSlice:
		keys := make([]string, len(t))
		for i, item := range t {
			k, err := yamlKey(item.Key)
			if err != nil {
				return nil, err
			}
			keys[i] = k
		}
		last := lastIndex(keys)
		dst = append(dst, '{')
		first := true
		for i, item := range t {
			if last(keys[i]) != i {
				if strict {
					return nil, errSlow
				}
				continue // the last one wins
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			var err error
			if dst, err = appendString(dst, keys[i]); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendYAML(dst, item.Value, strict, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []interface{}:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendYAML(dst, e, strict, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case string:
		return appendString(dst, t)
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case uint64:
		return strconv.AppendUint(dst, t, 10), nil
	case float64, time.Time:
		b, err := json.Marshal(t)
		if err != nil {
			return nil, errSlow
		}
		return append(dst, b...), nil
	}
	return nil, errSlow
}

// lastIndex answers where each key last appears: by a linear search in a
// small mapping, by a map in a large one.
func lastIndex(keys []string) func(string) int {
	if len(keys) <= 16 {
		return func(k string) int {
			for i := len(keys) - 1; i >= 0; i-- {
				if keys[i] == k {
					return i
				}
			}
			return -1
		}
	}
	m := make(map[string]int, len(keys))
	for i, k := range keys {
		m[k] = i
	}
	return func(k string) int { return m[k] }
}

// yamlKey turns a yaml.v2 key into its JSON name as sigs.k8s.io/yaml does.
func yamlKey(k interface{}) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", errSlow // floats and the rest: the reference converts them
}

// appendString quotes s; a string JSON cannot hold as is (invalid UTF-8)
// goes to the reference.
func appendString(dst []byte, s string) ([]byte, error) {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		return nil, errSlow
	}
	return out, nil
}

// AppendYAMLAsJSON appends the JSON text of a node yaml.v2 decoded into a
// goyaml.MapSlice (or any value under one) to dst, as sigs.k8s.io/yaml's
// YAMLToJSON would write it but for the order of keys, where a repeated key
// keeps its last value. A node sigs.k8s.io/yaml would refuse or write
// otherwise is an error; the caller then reads the document the
// reference way.
func AppendYAMLAsJSON(dst []byte, v interface{}) ([]byte, error) {
	return appendYAML(dst, v, false, 0)
}
