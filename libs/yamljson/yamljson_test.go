package yamljson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// agree checks one document against sigs.k8s.io/yaml: when Append accepts
// it, the reference must accept it too and read the same value. It answers
// whether Append accepted it.
func agree(t testing.TB, doc []byte) bool {
	t.Helper()
	got, err := Append(nil, doc)
	if err != nil {
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Append(%q): %v, want nil or ErrUnsupported", doc, err)
		}
		return false
	}
	want, rerr := yaml.YAMLToJSONStrict(doc)
	if rerr != nil {
		t.Fatalf("Append accepted %q as %s; the reference refuses it: %v", doc, got, rerr)
	}
	if len(got) == 0 {
		if string(want) != "null" {
			t.Fatalf("Append read %q as empty; the reference reads %s", doc, want)
		}
		return true
	}
	if !sameJSON(t, got, want) {
		t.Fatalf("Append read %q as\n %s\nthe reference as\n %s", doc, got, want)
	}
	return true
}

func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	for _, x := range []struct {
		js []byte
		v  *any
	}{{a, &va}, {b, &vb}} {
		d := json.NewDecoder(bytes.NewReader(x.js))
		d.UseNumber()
		if err := d.Decode(x.v); err != nil {
			t.Fatalf("not JSON: %s: %v", x.js, err)
		}
		if d.More() {
			t.Fatalf("trailing data after JSON: %s", x.js)
		}
	}
	return reflect.DeepEqual(va, vb)
}

// documents splits a file at its "---" lines.
func documents(data []byte) [][]byte {
	var docs [][]byte
	var cur []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, []byte(strings.Join(cur, "\n")))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, []byte(strings.Join(cur, "\n")))
}

// corpus is every YAML file of the repository's scenarios, examples and
// vendored Kueue samples, and the shared conformance scenarios.
func corpus(t testing.TB) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, root := range []string{"../../conformance", "../../examples", "../api/testdata", "../../../shared/conformance"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				files[path] = data
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if len(files) < 100 {
		t.Fatalf("found %d YAML files, want the repository's scenarios and examples", len(files))
	}
	return files
}

// TestTheCorpusAgrees: every document of every scenario and example reads
// as the reference reads it, and the scenarios (what the simulator and the
// benchmarks read) all take the fast path.
func TestTheCorpusAgrees(t *testing.T) {
	fast, slow := 0, 0
	for path, data := range corpus(t) {
		for _, doc := range documents(data) {
			if agree(t, doc) {
				fast++
				continue
			}
			slow++
			if strings.Contains(path, "conformance") && !strings.Contains(path, "kueue-public") {
				t.Errorf("%s: a scenario does not take the fast path", path)
			}
		}
	}
	t.Logf("%d documents read by Append, %d left to the reference", fast, slow)
}

// TestValues: how each kind of line is read, against values written by
// hand (not by the reference), and what the subset refuses.
func TestValues(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a: 1", `{"a":1}`},
		{"a: -12", `{"a":-12}`},
		{"a: 0", `{"a":0}`},
		{"a: '3'", `{"a":"3"}`},
		{"a: \"3\"", `{"a":"3"}`},
		{"a: 6Gi", `{"a":"6Gi"}`},
		{"a: 1.5Gi", `{"a":"1.5Gi"}`},
		{"a: 500m", `{"a":"500m"}`},
		{"a: true\nb: false\nc: null", `{"a":true,"b":false,"c":null}`},
		{"a:", `{"a":null}`},
		{"a: {}\nb: []", `{"a":{},"b":[]}`},
		{"a: x # note\nb: 'it''s' # note", `{"a":"x","b":"it's"}`},
		{"a: x#y", `{"a":"x#y"}`},
		{"a: http://h/p", `{"a":"http://h/p"}`},
		{"a: say \"hi\" \\o/", `{"a":"say \"hi\" \\o/"}`},
		{"a: ünïcode", `{"a":"ünïcode"}`},
		{"# c\n\na:\n  # c\n  b: 1\n", `{"a":{"b":1}}`},
		{"a:\n- 1\n- x\nb: 2", `{"a":[1,"x"],"b":2}`},
		{"a:\n  - b: 1\n    c:\n    - d\n    e: 2\n  -\n  - f", `{"a":[{"b":1,"c":["d"],"e":2},null,"f"]}`},
		{"a:\n-   b: 1\n    c: 2", `{"a":[{"b":1,"c":2}]}`},
		{"a:\n  -\n    b: 1", `{"a":[{"b":1}]}`},
		{"nvidia.com/gpu: 4\n'on': 1\n\"y\": 2", `{"nvidia.com/gpu":4,"on":1,"y":2}`},
		{"  a: 1\n  b: 2", `{"a":1,"b":2}`},
		{"a: [1, x, 'y', \"z\", [], {}]", `{"a":[1,"x","y","z",[],{}]}`},
		{"a: {b: 1, c: [d, e], f: {g: h}, j: -2}", `{"a":{"b":1,"c":["d","e"],"f":{"g":"h"},"j":-2}}`},
		{"a: { b: 1 }  # note", `{"a":{"b":1}}`},
		{"a: >-\n  one\n  # two\nb: 1", `{"a":"one # two","b":1}`},
		{"a: >\n  one\n  two\n", `{"a":"one two\n"}`},
		{"a: |-\n  one\n  two\n", `{"a":"one\ntwo"}`},
		{"a: |\n  one\n  two\n\nb: 1", `{"a":"one\ntwo\n","b":1}`},
		{"b:\n- a: |-\n    x\n  c: 1", `{"b":[{"a":"x","c":1}]}`},
		{"", ``},
		{"# only a comment\n", ``},
	} {
		got, err := Append(nil, []byte(c.in))
		if err != nil {
			t.Errorf("Append(%q): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Append(%q) = %s, want %s", c.in, got, c.want)
		}
		agree(t, []byte(c.in))
	}
	for _, in := range []string{
		"a: yes", "a: No", "a: on", "a: OFF", "a: y", "a: True", "a: NULL", "a: ~",
		"on: 1", "y: 1", "null: 1", "1: a", "<<: {a: 1}",
		"a: 0x1f", "a: 017", "a: 1e3", "a: 1.5", "a: 1_000", "a: 2026-01-01", "a: 1:30", "a: .inf", "a: +1", "a: -0",
		"a: 12345678901234567890",
		"a: &x 1", "a: *x", "a: !!str 1", "a: |\n  x", "a: >\n  x", "a: {",
		"a: [1,]", "a: [1, , 2]", "a: {b}", "a: {b:, c: 1}", "a: {b: , c: 1}", "a: {b: }", "a: [b: c]", "a: [1", "a: [1] x", "a: {b: 1, b: 2}", "a: [x#y]",
		"a: |+\n  x\n", "a: |2\n  x\n", "a: |\n  x\n\n  y\n", "a: |\n  x\n    y\n", "a: | # c\n  x\n", "a: >\n  x \n", "a: |\nb: 1",
		"a: \"x\\n\"", "a: 'x", "a: x\n  y", "a: b: c", "a: x:", "? a\n: 1",
		"a: 1\na: 2", "a:\n  b: 1\n  b: 2",
		"a:\t1", "a: 1\r\n", "\ufeffa: 1", "a: \x01", "a: \u0085", "a: \xff",
		"- 1", "a: 1\n- 2", "a:\n- - 1", "a:\n  b: 1\n c: 2", "---\na: 1", "%YAML 1.1\na: 1",
		"a b: 1", "'a''b': 1", "\"a\\b\": 1", "a: 'x' y", "a: {} x", "a: -", "a: -x",
	} {
		if _, err := Append(nil, []byte(in)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Append(%q): %v, want ErrUnsupported", in, err)
		}
	}
}

// TestDepthIsBounded: nesting past MaxDepth is left to the reference
// instead of recursing without end.
func TestDepthIsBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i <= MaxDepth; i++ {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	if _, err := Append(nil, []byte(b.String())); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Append of %d levels: %v, want ErrUnsupported", MaxDepth+1, err)
	}
}

// FuzzAgrees: whatever Append accepts, sigs.k8s.io/yaml reads the same.
func FuzzAgrees(f *testing.F) {
	for _, data := range corpus(f) {
		for _, doc := range documents(data) {
			if len(doc) < 4096 {
				f.Add(doc)
			}
		}
	}
	f.Add([]byte("a:\n- b: 1\n  c: [x]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		agree(t, doc)
	})
}

// TestLongKeysGoToTheReference: yaml.v2 refuses a key more than 1024
// characters long (its scanner gives up on a simple key that far behind),
// so Append must leave such a key to the reference, in block and in flow
// mappings, plain or quoted, while a key of exactly 1024 is still its own.
func TestLongKeysGoToTheReference(t *testing.T) {
	for _, n := range []int{1024, 1025} {
		plain := "k" + strings.Repeat("x", n-1)
		quoted := "'" + strings.Repeat("x", n-2) + "'"
		for _, doc := range []string{
			plain + ": 1\n", quoted + ": 1\n", "a:\n  " + plain + ": 1\n",
			"a: {" + plain + ": 1}\n", "a: {b: 1, " + quoted + ": 1}\n",
		} {
			_, err := Append(nil, []byte(doc))
			_, rerr := yaml.YAMLToJSONStrict([]byte(doc))
			if long := n > 1024; long != errors.Is(err, ErrUnsupported) || long != (rerr != nil) {
				t.Errorf("a %d-character key in %.12q…: Append %v, the reference %v; want both to refuse it only past 1024", n, doc, err, rerr)
			}
			agree(t, []byte(doc))
		}
	}
}
