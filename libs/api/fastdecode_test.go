package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFastPathTakesValidInput: the valid requests a user sends every day
// (Kueue's examples, JSON, YAML streams, Lists) take the fast path and
// decode to exactly what the reference decode gives. A fast path that gave
// up on everything would pass every other test.
func TestFastPathTakesValidInput(t *testing.T) {
	inputs := map[string]string{
		"single-clusterqueue-setup": singleClusterQueueSetup,
		"sample-job":                sampleJob,
		"multi-doc":                 multiDocYAML,
		"workload-json":             `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"namespace":"a","name":"w"},"spec":{"podSets":[{"count":2,"minCount":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`,
		"list":                      `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"a"}}]}`,
		"numbers-as-quantities":     "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: c}\nspec:\n  cohort: x\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 1.5, lendingLimit: 1}\n",
		"ampersand-and-unicode":     "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns, annotations: {a: \"x && y <b> é \\t\"}}\nspec:\n  template:\n    spec:\n      containers: [{name: c, command: [sh, -c, 'a && b']}]\n",
	}
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// A read-back form (status to drop) is the reference's work by
		// design: the fast path gives it up.
		if _, rerr := decodeReference(data); rerr == nil && !strings.Contains(string(data), "\nstatus:") {
			inputs[path] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			ref, rerr := decodeReference([]byte(in))
			if rerr != nil {
				t.Fatalf("reference refuses the input: %v", rerr)
			}
			fast, err := fastDecode([]byte(in), DecodeOptions{})
			if err != nil {
				t.Fatalf("fast path gave up on a valid input")
			}
			if diff := cmp.Diff(ref, fast); diff != "" {
				t.Fatalf("(-reference +fast):\n%s", diff)
			}
		})
	}
}

// TestFastPathAgreesOnEdgeCases runs inputs where two JSON decoders are
// known to differ (number forms, null, case, duplicates, escapes, YAML 1.1
// scalars, merge keys, status) through both paths: the fast path may give
// up, but what it accepts the reference accepts as the same objects.
func TestFastPathAgreesOnEdgeCases(t *testing.T) {
	wl := func(spec string) string {
		return `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"ns"},"spec":` + spec + `}`
	}
	ps := func(count string) string {
		return `{"podSets":[{"name":"main","count":` + count + `,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}`
	}
	accepted := 0
	for _, in := range []string{
		wl(ps("1")), wl(ps("1.0")), wl(ps("1e0")), wl(ps("-0")), wl(ps("1.5")), wl(ps("2147483648")), wl(ps(`"1"`)), wl(ps("null")),
		wl(`{"podSets":[],"priority":null}`), wl(`{"podSets":[],"Priority":3}`), wl(`{"podSets":[],"priority":3,"priority":4}`),
		wl(`{"podSets":[],"queueName":"a\/b"}`), wl(`{"podSets":[],"queueName":"\u0041"}`), wl(`{"podSets":[],"queueName":"a\tb"}`),
		wl(`{"podSets":null}`), wl(`null`), wl(`{"podSets":[{"name":"m","count":1,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[]}}}]}`),
		wl(`{"podSets":[{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":null}}}]}}}]}`),
		wl(`{"podSets":[{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":1.5}}}]}}}]}`),
		wl(`{"podSets":[{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":" 1"}}}]}}}]}`),
		wl(`{"podSets":[{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","ports":[{"containerPort":"80"}]}]}}}]}`),
		wl(`{"podSets":[{"name":"m","count":1,"template":{"spec":{"containers":[{"name":"c","env":[{"name":"A","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}}]}]}}}]}`),
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  queueName: yes\n  podSets: []\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  active: yes\n  podSets: []\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  priority: 0x10\n  podSets: []\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns, labels: {1: a, true: b}}\nspec: {podSets: []}\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns, labels: {1.5: a}}\nspec: {podSets: []}\n",
		"base: &b {podSets: []}\napiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  <<: *b\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: [], queueName: \"\\xff\"}\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns, annotations: {a: !!binary aGVsbG8=}}\nspec: {podSets: []}\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns, annotations: {a: 2001-12-14t21:59:43.10-05:00}}\nspec: {podSets: []}\n",
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: []}\nstatus: {conditions: [{type: Admitted}]}\n",
		"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec: {podSets: [], priorityClassName: p}\n",
		"{}\n", "---\n---\n", "[]", `{"apiVersion":"v1","kind":"List","items":null}`,
	} {
		assertFastAgrees(t, []byte(in))
		if _, err := fastDecode([]byte(in), DecodeOptions{}); err == nil {
			accepted++
		}
	}
	if accepted < 10 {
		t.Errorf("the fast path took only %d of the edge cases: it should take the valid ones", accepted)
	}
}

// TestScanHead: the scan reads kind and apiVersion at the top level only,
// notices status and every server-set metadata field, and gives up on
// what it does not read plainly.
func TestScanHead(t *testing.T) {
	for _, f := range serverMetadata {
		h, ok := scanHead([]byte(`{"kind":"Workload","metadata":{"` + f + `":"1"}}`))
		if !ok || !h.serverFields || h.status {
			t.Errorf("metadata.%s: scanHead = %+v, %v; want serverFields", f, h, ok)
		}
	}
	cases := []struct {
		in   string
		want fastHead
		ok   bool
	}{
		{`{"apiVersion":"v1","kind":"List"}`, fastHead{apiVersion: "v1", kind: "List"}, true},
		{" {\n \"kind\" : \"Workload\" , \"apiVersion\" :\"a/b\"}\n", fastHead{apiVersion: "a/b", kind: "Workload"}, true},
		{`{"spec":{"kind":"X","apiVersion":"y","a":[{"kind":"Z"}]},"kind":"Workload"}`, fastHead{kind: "Workload"}, true},
		{`{"kind":"Workload","status":{}}`, fastHead{kind: "Workload", status: true, serverFields: true}, true},
		{`{"kind":"Workload","spec":{"status":1}}`, fastHead{kind: "Workload", serverFields: true}, true},
		{`{"kind":"Workload","metadata":{"labels":{"a":"status"}}}`, fastHead{kind: "Workload"}, true},
		{`{"kind":"Workload","metadata":{"name":"a\"kind\":\"x"}}`, fastHead{kind: "Workload"}, true},
		{`{"kind":"Workload","kind":"Job"}`, fastHead{}, false},
		{`{"kind":1}`, fastHead{}, false},
		{`{"kind":null}`, fastHead{}, false},
		{`{"kind":{"a":"b"}}`, fastHead{}, false},
		{`{"kind":"Work\"load"}`, fastHead{}, false},
		{`{"ki\nd":"Workload"}`, fastHead{}, false},
		{`{"kind":"Workload"`, fastHead{}, false},
		{`{"kind":"Workload`, fastHead{}, false},
		{strings.Repeat("[", 70) + strings.Repeat("]", 70), fastHead{}, false},
	}
	for _, tc := range cases {
		h, ok := scanHead([]byte(strings.TrimSpace(tc.in)))
		if ok != tc.ok || (ok && h != tc.want) {
			t.Errorf("scanHead(%q) = %+v, %v; want %+v, %v", tc.in, h, ok, tc.want, tc.ok)
		}
	}
}
