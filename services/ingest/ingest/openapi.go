package ingest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The HTTP API's reference: one description per route (routeDocs, and
// the object API's from objectRoutes), served as an OpenAPI v3 document
// at GET /openapi/v3 and rendered into docs/api.md (RenderMarkdown). A
// test holds the descriptions to the routes ingest registers: every
// route described, nothing described that is not routed.

// param is a query parameter or header of a route.
type param struct {
	Name, In, Description string
}

// routeDoc describes one route.
type routeDoc struct {
	Summary string
	// Permission is what RBAC is asked (docs/security.md).
	Permission string
	Params     []param
	// Body describes the request body; "" for none.
	Body      string
	Responses map[int]string
}

var (
	namespaceParam = param{"namespace", "query", "only this namespace"}
	batchHeader    = param{"JQ-Batch", "header", "<id>/<size>: decide this change with the rest of its batch (needs create on workloads/batch)"}
	errorsCommon   = map[int]string{400: "invalid request; the body names the field", 401: "no valid credential", 403: "RBAC refused"}
)

func responses(ok map[int]string, extra ...int) map[int]string {
	out := map[int]string{}
	for k, v := range ok {
		out[k] = v
	}
	for k, v := range errorsCommon {
		out[k] = v
	}
	for _, code := range extra {
		out[code] = http.StatusText(code)
	}
	return out
}

// routeDocs describes every route but the object API's.
var routeDocs = map[string]routeDoc{
	"POST /v1/apply": {Summary: "Create or update configuration objects (multi-document YAML, JSON or a List), all or nothing",
		Permission: "create and update on each document's resource",
		Params:     []param{{"dryRun", "query", `"All": validate, authorize and answer (with each object as it would be stored) without applying`}},
		Body:       "ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass, PriorityClass, Configuration; status and server-set metadata are ignored",
		Responses:  responses(map[int]string{200: `{"applied":[{"kind","name","namespace","action"}]}`}, 409, 413)},
	"DELETE /v1/{kind}/{name}": {Summary: "Delete a cluster-scoped configuration object ({kind}: Kind, lower case, plural or resource name)",
		Permission: "delete on the kind's resource", Responses: responses(map[int]string{200: `{"deleted":{...}}`}, 404, 409)},
	"DELETE /v1/{kind}/{namespace}/{name}": {Summary: "Delete a namespaced configuration object (a LocalQueue)",
		Permission: "delete on the kind's resource in the namespace", Responses: responses(map[int]string{200: `{"deleted":{...}}`}, 404, 409)},
	"POST /v1/workloads": {Summary: "Submit Workloads or batch/v1 Jobs (several at once: one atomic batch)",
		Permission: "create on workloads (or jobs) in each document's namespace; also on workloads/priority for a Workload whose spec.priority is not its class's value (0 without a class)",
		Params:     []param{{"Idempotency-Key", "header", "at most 256 printable ASCII bytes; the same key and document again answers the first submission"}},
		Body:       "a Workload or a Job with the kueue.x-k8s.io/queue-name label, or several; a Workload's status and server-set metadata (an exported Workload) are ignored",
		Responses: responses(map[int]string{200: "the same submission again", 202: `{"namespace","name","uid","seq"}, or {"items":[...]}`,
			503: "a priority class (or the log) could not be read, or admission is behind: retry after Retry-After"}, 409, 413)},
	"GET /v1/workloads": {Summary: "List workloads (jetqueue's view), one page",
		Permission: "list on workloads (every namespace the caller may list in, without ?namespace=)",
		Params: []param{namespaceParam, {"localQueue", "query", "only this LocalQueue"}, {"clusterQueue", "query", "only this ClusterQueue"},
			{"status", "query", "pending, admitted, finished or inactive"}, {"limit", "query", "1 to 1000 (default 100)"}, {"after", "query", "the previous page's next"}},
		Responses: responses(map[int]string{200: `{"items":[Workload view],"next":"cursor"}`})},
	"GET /v1/workloads/{ns}/{name}": {Summary: "One workload (jetqueue's view) with its whole history", Permission: "get on workloads",
		Responses: responses(map[int]string{200: "Workload view plus events"}, 404)},
	"DELETE /v1/workloads/{ns}/{name}": {Summary: "Delete a workload, releasing its quota", Permission: "delete on workloads",
		Params: []param{batchHeader}, Responses: responses(map[int]string{202: `{"namespace","name","seq"}`}, 404, 409)},
	"POST /v1/workloads/{ns}/{name}/finish": {Summary: "Mark a workload's job finished", Permission: "create on workloads/finish",
		Params: []param{batchHeader}, Body: `{"succeeded":true}` + " (optional)", Responses: responses(map[int]string{202: `{"namespace","name","seq"}`}, 404, 409)},
	"POST /v1/workloads/{ns}/{name}/podsready": {Summary: "Report a workload's pods ready", Permission: "create on workloads/podsready",
		Params: []param{batchHeader}, Responses: responses(map[int]string{202: `{"namespace","name","seq"}`}, 404, 409)},
	"POST /v1/workloads/{ns}/{name}/priority": {Summary: "Change a workload's priority", Permission: "create on workloads/priority",
		Params: []param{batchHeader}, Body: `{"priority":100}`, Responses: responses(map[int]string{202: `{"namespace","name","seq"}`}, 404, 409)},
	"POST /v1/workloads/{ns}/{name}/active": {Summary: "Set a workload's spec.active: false takes it out of its queue (an admitted one is evicted, InactiveWorkload), true puts it back",
		Permission: "update on workloads", Params: []param{batchHeader}, Body: `{"active":false}`,
		Responses: responses(map[int]string{202: `{"namespace","name","seq"}`}, 404, 409)},
	"GET /v1/workloads/{ns}/{name}/explain": {Summary: "Why a workload is where it is: reason, blocking cell, shortfall, who is ahead",
		Permission: "get on workloads", Responses: responses(map[int]string{200: "the view plus detail, ahead, aheadCount"}, 404)},
	"GET /v1/clusterqueues": {Summary: "ClusterQueues with usage and counts (jetqueue's summary)", Permission: "list on clusterqueues",
		Responses: responses(map[int]string{200: `{"items":[...]}`})},
	"GET /v1/clusterqueues/{name}": {Summary: "One ClusterQueue's summary", Permission: "get on clusterqueues",
		Responses: responses(map[int]string{200: "the summary"}, 404)},
	"POST /v1/whatif": {Summary: "Replay the recorded history with a changed configuration and compare each ClusterQueue, old against new (docs/history.md)",
		Permission: "list on clusterqueues; moved workloads the caller may not get are hidden",
		Params: []param{{"since", "query", "a window ending now (a Go duration), or"}, {"from", "query", "RFC 3339 start, with to"},
			{"to", "query", "RFC 3339 end"}, {"top", "query", "how many moved workloads to list"}},
		Body: "configuration documents, as POST /v1/apply takes", Responses: responses(map[int]string{200: "the comparison"}, 410, 422)},
	"GET /v1/eta": {Summary: "Pending workloads with position, reason and ETA (libs/eta), in ClusterQueue order then position",
		Permission: "list on workloads (every namespace the caller may list in, without ?namespace=)",
		Params: []param{namespaceParam, {"clusterQueue", "query", "only this ClusterQueue"}, {"localQueue", "query", "only this LocalQueue"},
			{"limit", "query", "a page's size"}, {"offset", "query", "how many to skip"}},
		Responses: responses(map[int]string{200: `{"items":[{"namespace","name","position","reason","eta"}],...}`}, 410)},
	"GET /v1/watch/workloads": {Summary: "Server-sent events (text/event-stream): each later event about a workload the caller may watch, and configuration changes when it may list clusterqueues",
		Permission: "watch on workloads (every namespace the caller may watch in, without ?namespace=)",
		Params:     []param{namespaceParam, {"since", "query", "resume after this stream sequence"}},
		Responses:  responses(map[int]string{200: "event: workload / event: config, data: {seq,type,time,...}"}, 429)},
	"GET /version": {Summary: "The server's version (k8s.io/apimachinery version.Info)", Permission: "any identified caller",
		Responses: responses(map[int]string{200: `{"gitVersion",...}`})},
	"GET /openapi/v3": {Summary: "This document (OpenAPI 3.0)", Permission: "any identified caller",
		Responses: responses(map[int]string{200: "the OpenAPI document"})},
	"GET /v1/sync": {Summary: "Return once every published event is processed by every service and the projection",
		Permission: "any identified caller", Params: []param{{"timeout", "query", "a duration up to 5m (default 10s)"}},
		Responses: responses(map[int]string{200: `{"seq":N}`}, 504)},
	"POST /v1/debug/clock/advance": {Summary: "Move the shared manual clock (only with --manual-clock; 404 otherwise)",
		Permission: "post on the path (non-resource URL)", Body: `{"duration":"6m"}`, Responses: responses(map[int]string{200: `{"now":...}`}, 404)},
	"POST /v1/projection/rebuild": {Summary: "Drop the projection and replay the stream into it", Permission: "post on the path (non-resource URL)",
		Responses: responses(map[int]string{202: `{"rebuilding":true}`})},
	"GET /v1/projection/rebuild": {Summary: "How far the projection is: the last stream sequence it holds and the stream's last (a rebuild's progress)",
		Permission: "get on the path (non-resource URL)", Responses: responses(map[int]string{200: `{"seq":N,"streamSeq":M}`})},
}

// readParams are the read-your-writes parameters of the queries
// (readafter.go).
var readParams = []param{{"minSeq", "query", "answer once the projection holds this stream sequence (a write's seq)"},
	{HeaderMinSeq, "header", "the same as minSeq"}, {"minSeqTimeout", "query", "how long to wait for it: above 0, at most 30s (default 10s); then 504"}}

var atParam = param{"at", "query", "RFC 3339: answer as the system stood then, replayed from the event log (docs/history.md)"}

func init() {
	for pattern, extra := range map[string][]param{
		"GET /v1/workloads":                     {atParam},
		"GET /v1/workloads/{ns}/{name}":         nil,
		"GET /v1/workloads/{ns}/{name}/explain": {atParam, {"counterfactual", "query", "true: add the smallest changes that would admit it, each verified by the core (default false; jqctl explain asks for them)"}},
		"GET /v1/clusterqueues":                 nil,
		"GET /v1/clusterqueues/{name}":          {atParam},
	} {
		d := routeDocs[pattern]
		d.Params = append(append(append([]param{}, d.Params...), extra...), readParams...)
		d.Responses = responses(d.Responses, 504)
		routeDocs[pattern] = d
	}
}

// objectRouteDoc describes a route of the object API.
func objectRouteDoc(pattern string, d resourceDef) routeDoc {
	one := strings.HasSuffix(pattern, "/{name}")
	doc := routeDoc{Responses: responses(map[int]string{200: d.Kind + "List, or with watch=true a stream of watch events"})}
	selectors := []param{{"labelSelector", "query", "apimachinery label selector"},
		{"fieldSelector", "query", "metadata.name, metadata.namespace" + fieldLabels(d)},
		{"watch", "query", `"true": stream {"type":"ADDED|MODIFIED|DELETED","object":...} lines as changes happen`},
		{"resourceVersion", "query", "with watch: follow the changes after this list's resourceVersion"},
		{"timeoutSeconds", "query", "with watch: end the stream after this many seconds (1 to 3600, default 1800)"}}
	switch {
	case one:
		doc.Summary = "One " + d.Kind + ", as Kueue shows it (status included)"
		doc.Permission = "get on " + d.Resource
		doc.Responses = responses(map[int]string{200: "the " + d.Kind}, 404)
	case strings.Contains(pattern, "/namespaces/{ns}/"):
		doc.Summary = "The " + d.Kind + "s of a namespace, as Kueue shows them"
		doc.Permission = "list (watch with watch=true) on " + d.Resource + " in the namespace"
		doc.Params = selectors
	default:
		doc.Summary = "Every " + d.Kind + ", as Kueue shows them"
		doc.Permission = "list (watch with watch=true) on " + d.Resource
		if d.Namespaced {
			doc.Summary += " (every namespace the caller may list in)"
		}
		doc.Params = selectors
	}
	if d.Kind == "Workload" && !one {
		doc.Params = append(doc.Params, param{"limit", "query", "1 to 1000 (default 500)"}, param{"continue", "query", "the previous page's metadata.continue"})
	}
	doc.Params = append(doc.Params, readParams...)
	doc.Responses[429] = "too many watches (watch=true)"
	doc.Responses[504] = http.StatusText(504)
	return doc
}

func fieldLabels(d resourceDef) string {
	var labels []string
	for l := range d.Fields {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	if len(labels) == 0 {
		return ""
	}
	return ", " + strings.Join(labels, ", ")
}

// documentedRoutes are every route's pattern with its description.
func documentedRoutes() map[string]routeDoc {
	out := map[string]routeDoc{}
	for p, d := range routeDocs {
		out[p] = d
	}
	for _, v := range visibilityVersions {
		base := "GET /apis/" + visibilityGroup + "/" + v
		out[base+"/clusterqueues/{cq}/pendingworkloads"] = routeDoc{Summary: "Kueue's visibility API (" + v + "): a ClusterQueue's pending workloads in queue order, with positions",
			Permission: "get on clusterqueues/pendingworkloads (visibility.kueue.x-k8s.io)",
			Params:     []param{{"limit", "query", "0 to 10000; 0 or absent: 1000"}, {"offset", "query", "default 0"}},
			Responses:  responses(map[int]string{200: "PendingWorkloadsSummary; errors are metav1.Status"}, 404)}
		out[base+"/namespaces/{ns}/localqueues/{lq}/pendingworkloads"] = routeDoc{Summary: "Kueue's visibility API (" + v + "): a LocalQueue's pending workloads in queue order, with positions",
			Permission: "get on localqueues/pendingworkloads (visibility.kueue.x-k8s.io)",
			Params:     []param{{"limit", "query", "0 to 10000; 0 or absent: 1000"}, {"offset", "query", "default 0"}},
			Responses:  responses(map[int]string{200: "PendingWorkloadsSummary; errors are metav1.Status"}, 404)}
	}
	for p, d := range objectRoutes() {
		out[p] = objectRouteDoc(p, d)
	}
	return out
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// OpenAPI is the HTTP API as an OpenAPI 3.0 document.
func OpenAPI() *spec3.OpenAPI {
	doc := &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "jetqueue", Version: "v1",
		Description: "jetqueue's HTTP API, served by ingest. Errors are {\"errors\":[{\"object\",\"field\",\"message\"}]}, except under /apis/, where they are a metav1.Status (any other path or method there is a 404 or 405 Status).\n\n" + retriesDoc}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{}}}
	for pattern, d := range documentedRoutes() {
		method, path, _ := strings.Cut(pattern, " ")
		p := doc.Paths.Paths[path]
		if p == nil {
			p = &spec3.Path{}
			doc.Paths.Paths[path] = p
		}
		op := &spec3.Operation{OperationProps: spec3.OperationProps{Summary: d.Summary, Description: "Authorization: " + d.Permission + ".",
			OperationId: strings.ToLower(method) + pathParam.ReplaceAllString(strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(path), "$1"),
			Responses:   &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}}}}
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			op.Parameters = append(op.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: m[1], In: "path", Required: true,
				Schema: spec.StringProperty()}})
		}
		for _, prm := range d.Params {
			op.Parameters = append(op.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: prm.Name, In: prm.In,
				Description: prm.Description, Schema: spec.StringProperty()}})
		}
		if d.Body != "" {
			media := map[string]*spec3.MediaType{}
			for _, t := range []string{"application/json", "application/yaml"} {
				media[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}}}
			}
			op.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Description: d.Body, Content: media}}
		}
		for code, text := range d.Responses {
			op.Responses.StatusCodeResponses[code] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: text}}
		}
		switch method {
		case "GET":
			p.Get = op
		case "POST":
			p.Post = op
		case "DELETE":
			p.Delete = op
		case "PUT":
			p.Put = op
		case "PATCH":
			p.Patch = op
		}
	}
	return doc
}

// RenderMarkdown renders the document as docs/api.md.
func RenderMarkdown(doc *spec3.OpenAPI) string {
	var b strings.Builder
	b.WriteString("# HTTP API reference\n\n<!-- Generated from ingest's OpenAPI document (GET /openapi/v3); do not edit.\n")
	b.WriteString("     Regenerate: cd services/ingest && go test ./ingest -run TestAPIReferenceIsCurrent -update -->\n\n")
	b.WriteString(doc.Info.Description + "\n\n")
	paths := make([]string, 0, len(doc.Paths.Paths))
	for p := range doc.Paths.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		p := doc.Paths.Paths[path]
		for _, m := range []struct {
			name string
			op   *spec3.Operation
		}{{"GET", p.Get}, {"POST", p.Post}, {"PUT", p.Put}, {"PATCH", p.Patch}, {"DELETE", p.Delete}} {
			if m.op == nil {
				continue
			}
			fmt.Fprintf(&b, "## `%s %s`\n\n%s\n\n%s\n\n", m.name, path, m.op.Summary, m.op.Description)
			if len(m.op.Parameters) > 0 {
				b.WriteString("| parameter | in | description |\n| --- | --- | --- |\n")
				for _, prm := range m.op.Parameters {
					fmt.Fprintf(&b, "| `%s` | %s | %s |\n", prm.Name, prm.In, strings.ReplaceAll(prm.Description, "|", "\\|"))
				}
				b.WriteString("\n")
			}
			if m.op.RequestBody != nil {
				fmt.Fprintf(&b, "Body: %s\n\n", m.op.RequestBody.Description)
			}
			codes := make([]int, 0, len(m.op.Responses.StatusCodeResponses))
			for c := range m.op.Responses.StatusCodeResponses {
				codes = append(codes, c)
			}
			slices.Sort(codes)
			b.WriteString("| status | answer |\n| --- | --- |\n")
			for _, c := range codes {
				fmt.Fprintf(&b, "| %d | %s |\n", c, strings.ReplaceAll(m.op.Responses.StatusCodeResponses[c].Description, "|", "\\|"))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
