package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"
)

// Decode parses one or many documents: YAML separated by "---" lines, a
// single JSON object, a JSON (or YAML) array of objects, or a `kind: List`
// with items. Decoding is strict: an unknown or duplicate field is an error
// naming its path. Empty documents are skipped. apiVersion+kind select the
// type; a kind outside jetqueue's scope is an error matching
// ErrUnsupportedKind, a known kind under another apiVersion an error on
// "apiVersion". Every decoded object is passed through Default; nothing is
// validated (call Validate).
//
// No string anywhere in a document (values and map keys, in every field)
// may hold a control character other than tab, line feed and carriage
// return, or be invalid UTF-8; at most MaxDocuments objects are read, and
// decoding stops at the first one over.
//
// All documents are decoded even when some fail. The objects returned next to
// a non-nil error are the documents that decoded cleanly, in input order, so
// a caller may, for example, ignore documents whose only problem is
// ErrUnsupportedKind; a caller wanting all-or-nothing discards them.
//
// Valid requests take the one-pass fast path (fastdecode.go); a request it
// does not take whole is decoded by decodeReference, which names errors.
func Decode(data []byte) ([]Object, error) {
	return DecodeWith(data, DecodeOptions{})
}

// DecodeOptions adjust Decode.
type DecodeOptions struct {
	// DefaultNamespace, when set, is given to every LocalQueue, Workload
	// and Job that has no metadata.namespace, as kubectl gives the
	// namespace of -n or of its context.
	DefaultNamespace string
}

// DecodeWith is Decode with options.
func DecodeWith(data []byte, o DecodeOptions) ([]Object, error) {
	if objs, err := fastDecode(data, o); err == nil {
		return objs, nil
	}
	return decodeReferenceWith(data, o)
}

// DecodeReference is the decode Decode falls back to, exported for
// benchmarks and differential tests; callers use Decode.
func DecodeReference(data []byte) ([]Object, error) { return decodeReference(data) }

// decodeReference is the decode that names every error with its field
// path. It reads each document several times over (a YAML node tree, a
// generic map, JSON text, a head, a strict typed pass, a string walk), so
// it is kept for requests the fast path gives up on.
func decodeReference(data []byte) ([]Object, error) {
	return decodeReferenceWith(data, DecodeOptions{})
}

func decodeReferenceWith(data []byte, o DecodeOptions) ([]Object, error) {
	d := decoder{opts: o}
	if trimmed := bytes.TrimSpace(data); isJSON(trimmed) {
		d.document(1, trimmed)
	} else {
		for n, doc := range yamlDocuments(data) {
			if d.full {
				break
			}
			d.yamlDocument(n, doc)
		}
	}
	return d.objs, d.errs.orNil()
}

type decoder struct {
	opts DecodeOptions
	objs []Object
	errs Errors
	// count is the number of objects met so far; full is set at the first
	// one over MaxDocuments, after which nothing more is read.
	count int
	full  bool
}

// admit counts one more object and reports whether it is within
// MaxDocuments, recording the error for the first one that is not.
func (d *decoder) admit(where string) bool {
	if d.full {
		return false
	}
	d.count++
	if d.count > MaxDocuments {
		d.full = true
		d.fail(where, where, "", fmt.Sprintf(tooManyDocsMsg, MaxDocuments))
		return false
	}
	return true
}

func isJSON(b []byte) bool {
	return len(b) > 0 && (b[0] == '{' || b[0] == '[') && json.Valid(b)
}

// yamlDocuments yields the documents (numbered from 1) between lines that
// consist of "---", optionally followed by blanks or a comment, the same
// separators kubectl accepts. It is lazy, so a caller that stops early
// does not pay for the rest of a huge stream.
func yamlDocuments(data []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		start, n := 0, 1
		for pos := 0; pos < len(data); {
			end := bytes.IndexByte(data[pos:], '\n')
			next := len(data)
			if end >= 0 {
				next = pos + end + 1
			}
			line := bytes.TrimRight(data[pos:next], "\r\n")
			if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
				rest = bytes.TrimSpace(rest)
				if len(rest) == 0 || rest[0] == '#' {
					if !yield(n, data[start:pos]) {
						return
					}
					start, n = next, n+1
				}
			}
			pos = next
		}
		yield(n, data[start:])
	}
}

// fail records an error; the document's position goes into the message
// unless it already is the Object (nothing better was known).
func (d *decoder) fail(where, object, fld, msg string) {
	if object != where {
		msg = where + ": " + msg
	}
	d.errs = append(d.errs, FieldError{Object: object, Field: fld, Message: msg})
}

func (d *decoder) yamlDocument(n int, doc []byte) {
	if plainScalar(doc) {
		// What document says of any scalar, without the parse: yaml.v2
		// scans a plain scalar at about 40 ns a byte, and a durable
		// submitter's junk (ingest refuses it all) cost ingest a core.
		where := fmt.Sprintf("document %d", n)
		if d.admit(where) {
			d.fail(where, where, "", "must be an object with apiVersion and kind")
		}
		return
	}
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		where := fmt.Sprintf("document %d", n)
		if !d.admit(where) {
			return
		}
		ref := where
		if loose, lerr := yaml.YAMLToJSON(doc); lerr == nil {
			if h, top, herr := readHead(loose); herr == nil {
				h.kind, _ = stringField(top, "kind")
				ref = h.ref(where)
			}
		}
		if path := duplicateKeyPath(doc); path != "" {
			d.fail(where, ref, path, fmt.Sprintf("duplicate field %q", path))
			return
		}
		d.fail(where, ref, "", err.Error())
		return
	}
	d.document(n, js)
}

// plainScalar says, without parsing, that a document of some size can
// only be a plain scalar (or a YAML error): no ':' anywhere, so no
// mapping key, and it starts with a letter or digit, none of YAML's
// indicators (comments, directives, tags, anchors, quotes, flow or block
// collections). Small documents are left to the parser: "null" and "~"
// are no document at all.
func plainScalar(doc []byte) bool {
	if len(doc) < 1024 || bytes.IndexByte(doc, ':') >= 0 {
		return false
	}
	t := bytes.TrimLeft(doc, " \t\r\n")
	if len(t) == 0 {
		return false
	}
	c := t[0]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// document handles one top-level JSON value: nothing, an object or a list.
func (d *decoder) document(n int, js []byte) {
	where := fmt.Sprintf("document %d", n)
	js = bytes.TrimSpace(js)
	switch {
	case len(js) == 0 || string(js) == "null":
		return
	case js[0] == '[':
		d.items(where, js)
	case js[0] == '{':
		d.object(where, js, true)
	default:
		if d.admit(where) {
			d.fail(where, where, "", "must be an object with apiVersion and kind")
		}
	}
}

// items decodes the elements of a JSON array one at a time, so a huge
// array is never held in memory whole.
func (d *decoder) items(where string, array []byte) {
	err := eachItem(array, func(i int, item json.RawMessage) bool {
		item = bytes.TrimSpace(item)
		w := fmt.Sprintf("%s, items[%d]", where, i)
		if len(item) == 0 || item[0] != '{' {
			if d.admit(w) {
				d.fail(w, w, "", "must be an object with apiVersion and kind")
			}
		} else {
			d.object(w, item, false)
		}
		return !d.full
	})
	if err != nil {
		d.fail(where, where, "", err.Error())
	}
}

// head is what is known of a document before its type is chosen.
type head struct {
	apiVersion, kind         string
	name, namespace, genName string
}

func (h head) ref(where string) string {
	if h.kind == "" {
		return where
	}
	name := h.name
	if name == "" {
		name = h.genName
	}
	if name == "" {
		return h.kind
	}
	if h.namespace != "" {
		return h.kind + "/" + h.namespace + "/" + name
	}
	return h.kind + "/" + name
}

func readHead(js []byte) (head, map[string]json.RawMessage, error) {
	var h head
	var top map[string]json.RawMessage
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &top); err != nil {
		return h, nil, err
	}
	var md struct {
		Name         string `json:"name"`
		Namespace    string `json:"namespace"`
		GenerateName string `json:"generateName"`
	}
	// Best effort: a malformed metadata is reported by the strict decode.
	_ = sigsjson.UnmarshalCaseSensitivePreserveInts(top["metadata"], &md)
	h.name, h.namespace, h.genName = md.Name, md.Namespace, md.GenerateName
	return h, top, nil
}

func stringField(top map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := top[key]
	if !ok {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func (d *decoder) object(where string, js []byte, allowList bool) {
	h, top, err := readHead(js)
	if err != nil {
		if d.admit(where) {
			d.fail(where, where, "", err.Error())
		}
		return
	}
	// A List is not an object of its own: its items are counted.
	if kind, _ := stringField(top, "kind"); kind != "List" && !d.admit(where) {
		return
	}
	var ok1, ok2 bool
	h.apiVersion, ok1 = stringField(top, "apiVersion")
	h.kind, ok2 = stringField(top, "kind")
	switch {
	case !ok1:
		d.fail(where, where, "apiVersion", "must be a string")
		return
	case !ok2:
		d.fail(where, where, "kind", "must be a string")
		return
	case h.kind == "":
		d.fail(where, where, "kind", "Required value")
		return
	}
	ref := h.ref(where)
	if h.kind == "List" {
		d.list(where, ref, h, js, allowList)
		return
	}
	_, known := kindAPIVersion[h.kind]
	if !known {
		d.fail(where, ref, "kind", fmt.Sprintf("%s %q (apiVersion %q); jetqueue accepts %s",
			ErrUnsupportedKind, h.kind, h.apiVersion, strings.Join(supportedKinds, ", ")))
		return
	}
	if h.apiVersion == "" {
		d.fail(where, ref, "apiVersion", "Required value")
		return
	}
	target, ok := decodeTarget(h.kind, h.apiVersion)
	if !ok {
		d.fail(where, ref, "apiVersion", fmt.Sprintf("Unsupported value: %q: supported values: %s (for kind %s)",
			h.apiVersion, supportedAPIVersions(h.kind), h.kind))
		return
	}
	if clean, ok := dropServerFields(h.kind, top); ok {
		js = clean
	}
	if fld, msg := checkStrings(reflect.TypeOf(target), js); msg != "" {
		d.fail(where, ref, fld, msg)
		return
	}
	strict, err := sigsjson.UnmarshalStrict(js, target)
	if err != nil {
		fld := locateDecodeError(reflect.TypeOf(target), js)
		d.fail(where, ref, fld, err.Error())
		return
	}
	if len(strict) > 0 {
		for _, se := range strict {
			fld := ""
			if fe, ok := se.(sigsjson.FieldError); ok {
				fld = fe.FieldPath()
			}
			msg := se.Error()
			unknown := strings.HasPrefix(se.Error(), "unknown field")
			if h.kind == KindConfiguration && unknown {
				msg += "; jetqueue implements only waitForPodsReady of Kueue's Configuration"
			}
			if feature := laterKueueField(h.kind, fld); unknown && feature != "" {
				msg = fmt.Sprintf(laterKueueMsg, fld, feature)
			}
			d.fail(where, ref, fld, msg)
		}
		return
	}
	obj, ferr := convert(target)
	if ferr != nil {
		d.fail(where, ref, ferr.Field, ferr.ErrorBody())
		return
	}
	setDefaultNamespace(obj, d.opts.DefaultNamespace)
	Default(obj)
	d.objs = append(d.objs, obj)
}

func (d *decoder) list(where, ref string, h head, js []byte, allowList bool) {
	if !allowList {
		d.fail(where, ref, "kind", "a List may not be nested in a List")
		return
	}
	if h.apiVersion != "" && h.apiVersion != "v1" {
		d.fail(where, ref, "apiVersion", fmt.Sprintf("Unsupported value: %q: supported values: \"v1\" (for kind List)", h.apiVersion))
		return
	}
	var l struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   json.RawMessage `json:"metadata"`
		Items      json.RawMessage `json:"items"`
	}
	strict, err := sigsjson.UnmarshalStrict(js, &l)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		d.fail(where, ref, "", err.Error())
		return
	}
	if len(l.Items) > 0 {
		d.items(where, l.Items)
	}
}

var kindAPIVersion = map[string]string{
	KindResourceFlavor:        KueueAPIVersion,
	KindClusterQueue:          KueueAPIVersion,
	KindLocalQueue:            KueueAPIVersion,
	KindWorkloadPriorityClass: KueueAPIVersion,
	KindWorkload:              KueueAPIVersion,
	KindPriorityClass:         SchedulingAPIVersion,
	KindJob:                   BatchAPIVersion,
	KindConfiguration:         ConfigAPIVersion,
}

var supportedKinds = []string{KindResourceFlavor, KindClusterQueue, KindLocalQueue, KindWorkloadPriorityClass,
	KindPriorityClass, KindWorkload, KindJob, KindConfiguration}

func newObject(kind string) Object {
	switch kind {
	case KindResourceFlavor:
		return &ResourceFlavor{}
	case KindClusterQueue:
		return &ClusterQueue{}
	case KindLocalQueue:
		return &LocalQueue{}
	case KindWorkloadPriorityClass:
		return &WorkloadPriorityClass{}
	case KindWorkload:
		return &Workload{}
	case KindPriorityClass:
		return &PriorityClass{}
	case KindJob:
		return &Job{}
	case KindConfiguration:
		return &Configuration{}
	}
	return nil
}

// duplicateKeyPath finds the first mapping key that appears twice, for the
// YAML decoder only reports a line number. yaml.v2 keeps duplicates when
// decoding into MapSlice.
func duplicateKeyPath(doc []byte) string {
	var root goyaml.MapSlice
	if goyaml.Unmarshal(doc, &root) != nil {
		return ""
	}
	return findDuplicate(root, nil)
}

func findDuplicate(v interface{}, path *field.Path) string {
	switch t := v.(type) {
	case goyaml.MapSlice:
		seen := map[string]bool{}
		for _, item := range t {
			key := fmt.Sprint(item.Key)
			var p *field.Path
			if path == nil {
				p = field.NewPath(key)
			} else {
				p = path.Child(key)
			}
			if seen[key] {
				return p.String()
			}
			seen[key] = true
			if dup := findDuplicate(item.Value, p); dup != "" {
				return dup
			}
		}
	case []interface{}:
		for i, e := range t {
			if dup := findDuplicate(e, path.Index(i)); dup != "" {
				return dup
			}
		}
	}
	return ""
}

// locateDecodeError finds the deepest field whose value alone fails to decode
// into its Go type, because errors raised by UnmarshalJSON methods (a bad
// Quantity or Duration, say) carry no path. It returns "" when it cannot tell.
func locateDecodeError(t reflect.Type, js []byte) string {
	var v interface{}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(js, &v) != nil {
		return ""
	}
	return locate(t, v, "", 0)
}

func decodesInto(t reflect.Type, v interface{}) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return sigsjson.UnmarshalCaseSensitivePreserveInts(b, reflect.New(t).Interface()) == nil
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func locate(t reflect.Type, v interface{}, path string, depth int) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 64 {
		return path
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]interface{})
		if !ok {
			return path
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if ok && !decodesInto(ft, obj[k]) {
				return locate(ft, obj[k], joinPath(path, k), depth+1)
			}
		}
	case reflect.Slice:
		arr, ok := v.([]interface{})
		if !ok {
			return path
		}
		for i, e := range arr {
			if !decodesInto(t.Elem(), e) {
				return locate(t.Elem(), e, path+"["+strconv.Itoa(i)+"]", depth+1)
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]interface{})
		if !ok {
			return path
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !decodesInto(t.Elem(), obj[k]) {
				return locate(t.Elem(), obj[k], path+"["+k+"]", depth+1)
			}
		}
	}
	return path
}

// jsonFields maps JSON names to field types, flattening embedded structs the
// way encoding/json does (TypeMeta and ObjectMeta's inline members).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
