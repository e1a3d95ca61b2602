package ingest

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/kube-openapi/pkg/spec3"
)

var update = flag.Bool("update", false, "rewrite docs/api.md from the OpenAPI document")

// TestOpenAPIDescribesEveryRoute: every route ingest registers is in the
// OpenAPI document, and nothing in it is not routed.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	_, all := (&Server{}).routeTable()
	// A pattern without a method is a fallback that answers errors only
	// (/apis/: 404 or 405 as a metav1.Status), not an operation.
	var routed []string
	for _, p := range all {
		if strings.Contains(p, " ") {
			routed = append(routed, p)
		}
	}
	var documented []string
	for path, p := range OpenAPI().Paths.Paths {
		for method, op := range map[string]*spec3.Operation{"GET": p.Get, "POST": p.Post, "PUT": p.Put, "PATCH": p.Patch, "DELETE": p.Delete} {
			if op != nil {
				documented = append(documented, method+" "+path)
			}
		}
	}
	slices.Sort(routed)
	slices.Sort(documented)
	if diff := cmp.Diff(routed, documented); diff != "" {
		t.Errorf("routes (-registered,+documented):\n%s", diff)
	}
}

// TestOpenAPIIsServed: GET /openapi/v3 answers the document.
func TestOpenAPIIsServed(t *testing.T) {
	f := newFrontDoor(t)
	code, _, body := f.do(t, "GET", "/openapi/v3", nil, "")
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("GET /openapi/v3: %d %s", code, body)
	}
	if doc.OpenAPI != "3.0.0" || doc.Paths["/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads/{name}"] == nil || doc.Paths["/v1/apply"] == nil {
		t.Errorf("the served document: %s %d paths", doc.OpenAPI, len(doc.Paths))
	}
}

// TestAPIReferenceIsCurrent: docs/api.md is the document rendered; -update
// rewrites it.
func TestAPIReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "api.md")
	got := RenderMarkdown(OpenAPI())
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("docs/api.md is stale (run: cd services/ingest && go test ./ingest -run TestAPIReferenceIsCurrent -update) (-file,+document):\n%s", diff)
	}
}
