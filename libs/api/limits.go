package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jetqueue/jetqueue/libs/quota"
)

// Bounds on what a client may send. Each is documented in
// docs/configuration.md ("Limits") and tested just under and just over.
const (
	// MaxDocuments is the most objects one Decode accepts: YAML documents,
	// JSON array elements and List items together. Decoding stops at the
	// first object over the limit, before reading the rest.
	MaxDocuments = 1000
	// MaxPodSets is Kueue's CRD bound on a Workload's podSets
	// (+kubebuilder:validation:MaxItems=8).
	MaxPodSets = 8
	// MaxPodSetCount bounds a podSet's count, and so a Job's pod count
	// min(parallelism, completions). Kueue only requires count >= 1; a
	// bound keeps every per-pod loop (the scorer ranks pods one by one)
	// and every count product finite.
	MaxPodSetCount = 1_000_000
	// MaxQuantityLength and MaxQuantityExponent bound how a quantity is
	// written ("1e-10000000" is a valid Kubernetes quantity whose parsing
	// alone takes seconds): every amount jetqueue can count fits in far
	// less.
	MaxQuantityLength   = 64
	MaxQuantityExponent = 30
)

// Messages of the limits, shared by the checks and their tests.
const (
	notExactMsg     = "must fit in int64 %s (at most %s)"
	controlCharMsg  = "must not contain control characters (%U at byte %d); only tab, line feed and carriage return are allowed"
	invalidUTF8Msg  = "must be valid UTF-8"
	tooManyDocsMsg  = "too many objects: at most %d per request"
	overflowMsg     = "the total %s request (count × per-pod request, summed over podSets) must fit in int64 %s"
	perPodExceedMsg = "the pod's total %s request (containers, init containers and overhead) must fit in int64 %s"
	quantityLenMsg  = "a quantity must be at most %d characters"
	quantityExpMsg  = "a quantity's exponent must be between -%d and %d"
)

// unitOf names the integer unit a resource is counted in.
func unitOf(name corev1.ResourceName) string {
	if name == corev1.ResourceCPU {
		return "milli-units"
	}
	return "units"
}

// exactQuantity refuses a quantity that does not convert exactly to the
// int64 unit the scheduler counts it in (quota.ValueExact).
func exactQuantity(name corev1.ResourceName, q string, fits bool, p *field.Path) field.ErrorList {
	if fits {
		return nil
	}
	return field.ErrorList{field.Invalid(p, q, fmt.Sprintf(notExactMsg, unitOf(name), quota.Format(name, math.MaxInt64)))}
}

// validateTotals checks that what the scheduler will compute for the
// workload fits exact int64 arithmetic: each pod's total request per
// resource, times its podSet's count, summed over podSets. The fields the
// totals come from are checked one by one by validatePodSpec.
// A rule added here must be added to workloadValid (validfast.go) too.
func validateTotals(podSets []PodSet, pp *field.Path) field.ErrorList {
	var errs field.ErrorList
	total := map[corev1.ResourceName]int64{}
	for i := range podSets {
		ps := &podSets[i]
		perPod, over := podTotal(&ps.Template.Spec)
		if over != "" {
			errs = append(errs, field.Invalid(pp.Index(i).Child("template", "spec"), field.OmitValueType{},
				fmt.Sprintf(perPodExceedMsg, over, unitOf(over))))
			continue
		}
		for _, name := range sortedKeys(perPod) {
			v, ok := quota.MulInt(perPod[name], int64(ps.Count))
			if !ok {
				errs = append(errs, field.Invalid(pp.Index(i).Child("count"), int64(ps.Count), fmt.Sprintf(overflowMsg, name, unitOf(name))))
				continue
			}
			if total[name], ok = quota.AddInt(total[name], v); !ok {
				errs = append(errs, field.Invalid(pp, field.OmitValueType{}, fmt.Sprintf(overflowMsg, name, unitOf(name))))
			}
		}
	}
	return errs
}

// podTotal is PodRequests with exact conversion: the per-pod requests, or
// the first resource (in name order) whose total does not fit int64.
func podTotal(spec *corev1.PodSpec) (map[corev1.ResourceName]int64, corev1.ResourceName) {
	total := podResourceList(spec)
	out := make(map[corev1.ResourceName]int64, len(total))
	for _, name := range sortedKeys(total) {
		if name == ResourcePods {
			continue
		}
		v, ok := quota.ValueExact(name, total[name])
		if !ok {
			return nil, name
		}
		if v > 0 {
			out[name] = v
		}
	}
	return out, ""
}

// checkStrings refuses, with its path, the first string or map key of a
// document that is not valid UTF-8 or holds a control character. It walks
// the JSON itself rather than the Go object, so no field, present or
// future, known or unknown, can slip past; the Go type t only chooses how
// the path is written (struct fields as ".name", map keys as "[key]").
// Postgres' jsonb refuses NUL, and control characters are terminal escapes
// in jqctl's output; tab, line feed and carriage return are ordinary text in
// scripts and annotations and stay allowed.
func checkStrings(t reflect.Type, js []byte) (path, msg string) {
	// json.Number keeps a numeric quantity's text for checkQuantity.
	var v interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", "" // the strict decode reports it
	}
	// encoding/json replaces invalid UTF-8 by U+FFFD while decoding, so it
	// is detected on the raw bytes and located by the replacement.
	w := stringWalker{invalidUTF8: !utf8.Valid(js)}
	if w.walk(t, v, "", 0) {
		return w.path, w.msg
	}
	if w.invalidUTF8 {
		return "", invalidUTF8Msg
	}
	return "", ""
}

type stringWalker struct {
	invalidUTF8 bool
	path, msg   string
}

// maxWalkDepth stops the walk of absurdly nested JSON; encoding/json
// already refuses nesting deeper than 10000.
const maxWalkDepth = 10000

func (w *stringWalker) walk(t reflect.Type, v interface{}, path string, depth int) bool {
	if depth > maxWalkDepth {
		return false
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case string:
		return w.check(x, path) || w.checkQuantity(t, x, path)
	case json.Number:
		return w.checkQuantity(t, string(x), path)
	case []interface{}:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, e := range x {
			if w.walk(elem, e, path+"["+strconv.Itoa(i)+"]", depth+1) {
				return true
			}
		}
	case map[string]interface{}:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, ft := w.child(t, path, k)
			if w.check(k, child) || w.walk(ft, x[k], child, depth+1) {
				return true
			}
		}
	}
	return false
}

// child is the path and Go type of key k under a value of type t.
func (w *stringWalker) child(t reflect.Type, path, k string) (string, reflect.Type) {
	if t != nil && t.Kind() == reflect.Map {
		return path + "[" + k + "]", t.Elem()
	}
	var ft reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		ft = cachedJSONFields(t)[k]
	}
	return joinPath(path, k), ft
}

func (w *stringWalker) check(s, path string) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && w.invalidUTF8:
			w.path, w.msg = path, invalidUTF8Msg
			return true
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			w.path, w.msg = path, fmt.Sprintf(controlCharMsg, r, i)
			return true
		}
	}
	return false
}

var quantityType = reflect.TypeOf(resource.Quantity{})

// checkQuantity bounds the text of a value that decodes into a Quantity
// before resource.ParseQuantity sees it: its length and its decimal
// exponent ("1e-10000000"). A binary suffix (Ki..Ei) and the SI suffix E
// are not exponents.
func (w *stringWalker) checkQuantity(t reflect.Type, s, path string) bool {
	if t != quantityType {
		return false
	}
	if len(s) > MaxQuantityLength {
		w.path, w.msg = path, fmt.Sprintf(quantityLenMsg, MaxQuantityLength)
		return true
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 || i+1 >= len(s) || s[i+1] == 'i' {
		return false
	}
	if exp, err := strconv.Atoi(s[i+1:]); err == nil && (exp > MaxQuantityExponent || exp < -MaxQuantityExponent) {
		w.path, w.msg = path, fmt.Sprintf(quantityExpMsg, MaxQuantityExponent, MaxQuantityExponent)
		return true
	}
	return false
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

func cachedJSONFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	f := jsonFields(t)
	fieldCache.Store(t, f)
	return f
}

// eachItem calls fn on each element of the JSON array js in order, without
// reading past the element where fn returns false. A JSON null is an empty
// array.
func eachItem(js []byte, fn func(i int, item json.RawMessage) bool) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('[') {
		return errors.New("must be an array")
	}
	for i := 0; dec.More(); i++ {
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return err
		}
		if !fn(i, item) {
			return nil
		}
	}
	return nil
}
