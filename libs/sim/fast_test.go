package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/api"
)

// TestParseFastAgrees reads every conformance scenario both ways: each one
// the reference accepts, the fast path must accept too (else it is no
// faster), and decode to the same Scenario; it may never accept what the
// reference refuses.
func TestParseFastAgrees(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../../conformance", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found %d scenarios under conformance/, expected hundreds", len(files))
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ref, rerr := parseReference(data)
		fast, ferr := parseFast(data)
		switch {
		case ferr == nil && rerr != nil:
			t.Errorf("%s: the fast path accepts what the reference refuses: %v", path, rerr)
		case ferr != nil && rerr == nil:
			t.Errorf("%s: the fast path gives up on a valid scenario", path)
		case ferr == nil:
			if diff := cmp.Diff(ref, fast, cmp.AllowUnexported(Expect{})); diff != "" {
				t.Errorf("%s: (-reference +fast):\n%s", path, diff)
			}
		}
	}
}

// TestParseFastJSONEdges: on JSON text the reference reads oddly or
// refuses, the one-scan reading agrees with it or gives up; it never
// accepts what the reference refuses or reads it otherwise.
func TestParseFastJSONEdges(t *testing.T) {
	wl := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"ns"},` +
		`"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c"}]}}}]}}`
	rf := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`
	for name, js := range map[string]string{
		"plain":                  `{"name":"s","objects":[` + rf + `],"steps":[{"submit":[` + wl + `]},{"advance":"1s"}]}`,
		"null parts":             `{"name":"s","description":null,"configuration":null,"objects":null,"steps":null}`,
		"unknown name":           `{"name":"s","bogus":1}`,
		"duplicate name":         `{"name":"s","name":"t"}`,
		"name in another case":   `{"Name":"s"}`,
		"name not a string":      `{"name":7}`,
		"no name":                `{"steps":[]}`,
		"step with two keys":     `{"name":"s","steps":[{"advance":"1s","finish":["ns/w"]}]}`,
		"empty step":             `{"name":"s","steps":[{}]}`,
		"null step":              `{"name":"s","steps":[null]}`,
		"submit null":            `{"name":"s","steps":[{"submit":null}]}`,
		"submit of a null":       `{"name":"s","steps":[{"submit":[null]}]}`,
		"submit not a list":      `{"name":"s","steps":[{"submit":{}}]}`,
		"invalid object":         `{"name":"s","objects":[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{}}]}`,
		"trailing text":          `{"name":"s"} {}`,
		"top level a list":       `[{"name":"s"}]`,
		"top level null":         `null`,
		"objects not a list":     `{"name":"s","objects":{}}`,
		"configuration a string": `{"name":"s","configuration":"x"}`,
	} {
		ref, rerr := parseJSON([]byte(js), api.Decode)
		fast, ferr := parseFastJSON([]byte(js))
		switch {
		case ferr == nil && rerr != nil:
			t.Errorf("%s: the one scan accepts what the reference refuses: %v", name, rerr)
		case ferr == nil:
			if diff := cmp.Diff(ref, fast, cmp.AllowUnexported(Expect{})); diff != "" {
				t.Errorf("%s: (-reference +fast):\n%s", name, diff)
			}
		case name == "plain" || name == "null parts":
			t.Errorf("%s: the one scan gives up on a valid scenario: %v", name, ferr)
		}
	}
}

// FuzzParseFastJSON: on any JSON text, the one-scan reading of a
// scenario agrees with the reference or gives up.
func FuzzParseFastJSON(f *testing.F) {
	wl := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"ns"},` +
		`"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c"}]}}}]}}`
	for _, seed := range []string{
		`{"name":"s","objects":[{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}],"steps":[{"submit":[` + wl + `]},{"advance":"1s"},{"finish":["ns/w"]}]}`,
		`{"name":"s","description":null,"configuration":{"waitForPodsReady":{"enable":true}},"objects":null,"steps":null}`,
		`{"name":"s","steps":[{"apply":[]},{"expect":{"pending":["ns/w"]}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		ref, rerr := parseJSON(js, api.Decode)
		fast, ferr := parseFastJSON(js)
		switch {
		case ferr == nil && rerr != nil:
			t.Fatalf("the one scan accepts what the reference refuses: %v", rerr)
		case ferr == nil:
			if diff := cmp.Diff(ref, fast, cmp.AllowUnexported(Expect{})); diff != "" {
				t.Fatalf("(-reference +fast):\n%s", diff)
			}
		}
	})
}
