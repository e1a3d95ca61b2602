package api

import (
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
)

// TestReadWorkloadAsTheTypedDecode: whatever readWorkload reads, the typed
// decode reads to the same Workload; it reads the common shapes, and gives
// up on each kind of text it does not take.
func TestReadWorkloadAsTheTypedDecode(t *testing.T) {
	const base = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w1","namespace":"ns-1","uid":"u-1","labels":{"a":"b"},"annotations":{"x/y":"z z"}},` +
		`"spec":{"queueName":"lq","priority":50,"priorityClassName":"p","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","active":true,` +
		`"podSets":[{"name":"main","count":3,"minCount":1,"template":{"metadata":{},"spec":{"initContainers":[{"name":"i"}],"containers":[{"name":"c","image":"busybox","command":["sh","-c"],"args":["x"],` +
		`"resources":{"requests":{"cpu":"3","memory":"6Gi"},"limits":{"cpu":4,"example.com/gpu":"1"}}}]}}}]}}`
	read := map[string]string{
		"everything":        base,
		"pretty":            strings.NewReplacer(",", ",\n  ", ":", " : ", "{", "{ ", "}", " }").Replace(base),
		"empty lists":       `{"kind":"Workload","metadata":{"labels":{}},"spec":{"podSets":[{"template":{"spec":{"containers":[{"command":[],"resources":{"requests":{}}}]}}}]}}`,
		"no podSets":        `{"kind":"Workload","spec":{"podSets":[]}}`,
		"empty":             `{}`,
		"numbers":           `{"spec":{"priority":-2147483648,"podSets":[{"count":2147483647,"template":{"spec":{"containers":[{"resources":{"requests":{"a":0,"b":-1.5,"c":1e3,"d":2E-2,"e":0.5}}}]}}}]}}`,
		"quantities":        `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"a":" 1 ","b":"1e30","c":"1Ei","d":"500m","e":"1E"}}}]}}}]}}`,
		"false":             `{"spec":{"active":false}}`,
		"template metadata": `{"spec":{"podSets":[{"template":{"metadata":{}}}]}}`,
	}
	gives := map[string]string{
		"unknown member":              `{"spec":{"x":1}}`,
		"template labels":             `{"spec":{"podSets":[{"template":{"metadata":{"labels":{"a":"b"}}}}]}}`,
		"duplicate template metadata": `{"spec":{"podSets":[{"template":{"metadata":{},"metadata":{}}}]}}`,
		"duplicate uid":               `{"metadata":{"uid":"a","uid":"b"}}`,
		"member in other case":        `{"Spec":{}}`,
		"duplicate member":            `{"spec":{},"spec":{}}`,
		"duplicate label":             `{"metadata":{"labels":{"a":"1","a":"2"}}}`,
		"duplicate resource":          `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":"1","cpu":"2"}}}]}}}]}}`,
		"null":                        `{"metadata":null}`,
		"null label":                  `{"metadata":{"labels":{"a":null}}}`,
		"null quantity":               `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":null}}}]}}}]}}`,
		"escape":                      `{"metadata":{"name":"a\"b"}}`,
		"escaped name":                `{"metadat\u0061":{}}`,
		"fraction in an int":          `{"spec":{"priority":1.0}}`,
		"exponent in an int":          `{"spec":{"priority":1e2}}`,
		"minus zero":                  `{"spec":{"priority":-0}}`,
		"leading zero":                `{"spec":{"priority":01}}`,
		"int32 overflow":              `{"spec":{"priority":2147483648}}`,
		"int32 underflow":             `{"spec":{"priority":-2147483649}}`,
		"long int":                    `{"spec":{"priority":000000000001}}`,
		"string int":                  `{"spec":{"priority":"1"}}`,
		"bad bool":                    `{"spec":{"active":tru}}`,
		"bool and more":               `{"spec":{"active":truex}}`,
		"number and more":             `{"spec":{"priority":1x}}`,
		"quantity exponent":           `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":"1e31"}}}]}}}]}}`,
		"quantity too long":           `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":"` + strings.Repeat("1", 65) + `"}}}]}}}]}}`,
		"quantity not a number":       `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":"x"}}}]}}}]}}`,
		"quantity object":             `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"requests":{"cpu":{}}}}]}}}]}}`,
		"other container field":       `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"env":[]}]}}}]}}`,
		"claims":                      `{"spec":{"podSets":[{"template":{"spec":{"containers":[{"resources":{"claims":[]}}]}}}]}}`,
		"trailing comma":              `{"spec":{},}`,
		"trailing text":               `{"spec":{}} x`,
		"two objects":                 `{}{}`,
		"unterminated":                `{"spec":{}`,
		"array for object":            `{"spec":[]}`,
		"missing colon":               `{"spec" {}}`,
		"raw control character":       "{\"metadata\":{\"name\":\"a\x01\"}}",
	}
	check := func(name, in string) bool {
		got, ok := readWorkload([]byte(in))
		var want Workload
		err := jsonv2.Unmarshal([]byte(in), &want, fastOptions)
		if ok {
			if err != nil {
				t.Errorf("%s: readWorkload reads %s; the typed decode refuses it: %v", name, in, err)
			} else if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("%s: readWorkload reads %s otherwise (-typed +read):\n%s", name, in, diff)
			}
		}
		return ok
	}
	for name, in := range read {
		if !check(name, in) {
			t.Errorf("%s: readWorkload gives up on %s", name, in)
		}
	}
	for name, in := range gives {
		if check(name, in) {
			t.Errorf("%s: readWorkload reads %s; it should leave it to the typed decode", name, in)
		}
	}
	// Every prefix and every one-byte change of a document: readWorkload
	// reads it as the typed decode does or gives up.
	for i := range len(base) {
		check("prefix", base[:i])
		for _, c := range []byte(`{}[]":,0-.eE tfn\x`) {
			check("changed", base[:i]+string(c)+base[i+1:])
		}
	}
}
