package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeValidate runs a request body through what ingest does with it:
// Decode, then Validate every object. It returns every error, in order.
func decodeValidate(t *testing.T, doc string) ([]Object, []FieldError) {
	t.Helper()
	objs, err := Decode([]byte(doc))
	errs := asErrors(t, err)
	for _, o := range objs {
		errs = append(errs, asErrors(t, Validate(o))...)
	}
	return objs, errs
}

func workloadJSON(podSets ...string) string {
	return `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"namespace":"ns","name":"w",` +
		`"annotations":{"a":"ok"}},"spec":{"queueName":"q","podSets":[` + strings.Join(podSets, ",") + `]}}`
}

func podSetJSON(name string, count int64, containers ...string) string {
	return fmt.Sprintf(`{"name":%q,"count":%d,"template":{"spec":{"containers":[%s]}}}`, name, count, strings.Join(containers, ","))
}

func cpuContainer(cpu string) string {
	return fmt.Sprintf(`{"name":"c","image":"img","resources":{"requests":{"cpu":%q}}}`, cpu)
}

func clusterQueueJSON(field, value string) string {
	return `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"cohort":"co",` +
		`"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"f","resources":[` +
		`{"name":"cpu","nominalQuota":"1","` + field + `":"` + value + `"},{"name":"memory","nominalQuota":"1Gi"}]}]}]}}`
}

// limitCase is one request and the single error it must get ("" field
// and message: accepted).
type limitCase struct {
	name, doc       string
	object, field   string
	messageContains string
}

func runLimitCases(t *testing.T, cases []limitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := decodeValidate(t, tc.doc)
			if tc.messageContains == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("want exactly 1 error on %s %s, got %d: %v", tc.object, tc.field, len(errs), errs)
			}
			got := errs[0]
			if diff := cmp.Diff([2]string{tc.object, tc.field}, [2]string{got.Object, got.Field}); diff != "" {
				t.Errorf("object/field (-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Message, tc.messageContains) {
				t.Errorf("message %q does not contain %q", got.Message, tc.messageContains)
			}
		})
	}
}

// TestNoControlCharactersAnywhere: a NUL (Postgres' jsonb refuses it) or
// another control character in any string or map key of any object is a
// 400 naming the field; tab, line feed and carriage return are text.
func TestNoControlCharactersAnywhere(t *testing.T) {
	const wl = "Workload/ns/w"
	ctrl := "must not contain control characters"
	withImage := func(image string) string {
		return workloadJSON(`{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","image":` + image + `}]}}}`)
	}
	runLimitCases(t, []limitCase{
		{"NUL in an annotation", strings.Replace(workloadJSON(podSetJSON("main", 1, cpuContainer("1"))), `"a":"ok"`, `"a":"o\u0000k"`, 1),
			wl, "metadata.annotations[a]", ctrl},
		{"NUL in an image", withImage(`"busy\u0000box"`), wl, "spec.podSets[0].template.spec.containers[0].image", ctrl},
		{"escape in an image", withImage(`"\u001b[31mred"`), wl, "spec.podSets[0].template.spec.containers[0].image", ctrl},
		{"DEL in an image", withImage(`"a\u007f"`), wl, "spec.podSets[0].template.spec.containers[0].image", ctrl},
		{"C1 CSI in an image", withImage(`"a\u009b"`), wl, "spec.podSets[0].template.spec.containers[0].image", ctrl},
		{"tab, newline and CR are text", withImage(`"a\tb\nc\r"`), "", "", ""},
		{"U+00A0 just past C1 is text", withImage(`"a\u00a0b"`), "", "", ""},
		{"NUL in an annotation key", strings.Replace(workloadJSON(podSetJSON("main", 1, cpuContainer("1"))), `"a":"ok"`, `"a\u0000":"ok"`, 1),
			wl, "metadata.annotations[a\x00]", ctrl},
		{"NUL in a container arg", withImage(`"img","args":["x","y\u0000"]`), wl, "spec.podSets[0].template.spec.containers[0].args[1]", ctrl},
		{"NUL in YAML", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: f\n  labels: {k: \"v\\0\"}\n",
			"ResourceFlavor/f", "metadata.labels[k]", ctrl},
		{"NUL in a ClusterQueue cohort", strings.Replace(clusterQueueJSON("borrowingLimit", "1"), `"cohort":"co"`, `"cohort":"c\u0000o"`, 1),
			"ClusterQueue/cq", "spec.cohort", ctrl},
		{"NUL in an unknown field", strings.Replace(withImage(`"img"`), `"queueName"`, `"nope":"\u0000","queueName"`, 1),
			wl, "spec.nope", ctrl},
		{"invalid UTF-8 in an image", withImage("\"a\xffb\""), wl, "spec.podSets[0].template.spec.containers[0].image", invalidUTF8Msg},
	})
}

// TestQuantitiesFitExactArithmetic: every amount, and every podSet's
// count × per-pod request summed over podSets, fits int64 in the unit the
// scheduler counts it in, or is a 400 naming the field. Each limit is tried
// just under and just over.
func TestQuantitiesFitExactArithmetic(t *testing.T) {
	const wl = "Workload/ns/w"
	const maxMilli = "9223372036854775807m"
	const overMilli = "9223372036854775808m"
	req0 := "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]"
	runLimitCases(t, []limitCase{
		{"cpu at the int64 limit", workloadJSON(podSetJSON("a", 1, cpuContainer(maxMilli))), "", "", ""},
		{"cpu one milli over", workloadJSON(podSetJSON("a", 1, cpuContainer(overMilli))), wl, req0, "must fit in int64 milli-units"},
		{"cpu 1e30", workloadJSON(podSetJSON("a", 1, cpuContainer("1e30"))), wl, req0, "must fit in int64 milli-units"},
		{"memory one byte over", workloadJSON(podSetJSON("a", 1, `{"name":"c","resources":{"limits":{"memory":"9223372036854775808"}}}`)),
			wl, "spec.podSets[0].template.spec.containers[0].resources.limits[memory]", "must fit in int64 units"},
		{"per-pod sum just under", workloadJSON(podSetJSON("a", 1, cpuContainer("9223372036854775806m"), cpuContainer("1m"))), "", "", ""},
		{"per-pod sum over", workloadJSON(podSetJSON("a", 1, cpuContainer(maxMilli), cpuContainer("1m"))),
			wl, "spec.podSets[0].template.spec", "the pod's total cpu request"},
		{"count × request just under", workloadJSON(podSetJSON("a", 4, cpuContainer("2305843009213693951m"))), "", "", ""},
		{"count × request over", workloadJSON(podSetJSON("a", 4, cpuContainer("2305843009213693952m"))),
			wl, "spec.podSets[0].count", "the total cpu request"},
		{"sum over podSets just under", workloadJSON(podSetJSON("a", 1, cpuContainer("9223372036854775806m")), podSetJSON("b", 1, cpuContainer("1m"))), "", "", ""},
		{"sum over podSets over", workloadJSON(podSetJSON("a", 1, cpuContainer(maxMilli)), podSetJSON("b", 1, cpuContainer("1m"))),
			wl, "spec.podSets", "the total cpu request"},
		{"nominalQuota just under", strings.Replace(clusterQueueJSON("borrowingLimit", "1"), `"nominalQuota":"1"`, `"nominalQuota":"`+maxMilli+`"`, 1), "", "", ""},
		{"nominalQuota over", strings.Replace(clusterQueueJSON("borrowingLimit", "1"), `"nominalQuota":"1"`, `"nominalQuota":"`+overMilli+`"`, 1),
			"ClusterQueue/cq", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "must fit in int64 milli-units"},
		{"borrowingLimit just under", clusterQueueJSON("borrowingLimit", maxMilli), "", "", ""},
		{"borrowingLimit over", clusterQueueJSON("borrowingLimit", "1e30"),
			"ClusterQueue/cq", "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "must fit in int64 milli-units"},
		{"exponent at the bound", workloadJSON(podSetJSON("a", 1, cpuContainer("1e-30"))), "", "", ""},
		{"exponent past the bound", workloadJSON(podSetJSON("a", 1, cpuContainer("1e-31"))), wl, req0, "exponent must be between -30 and 30"},
		{"huge exponent as a JSON number", strings.Replace(workloadJSON(podSetJSON("a", 1, cpuContainer("1"))), `"cpu":"1"`, `"cpu":1e-10000000`, 1),
			wl, req0, "exponent must be between -30 and 30"},
		{"quantity of 64 characters", workloadJSON(podSetJSON("a", 1, cpuContainer("0."+strings.Repeat("0", 61)+"1"))), "", "", ""},
		{"quantity of 65 characters", workloadJSON(podSetJSON("a", 1, cpuContainer("0."+strings.Repeat("0", 62)+"1"))), wl, req0, "at most 64 characters"},
		{"an exponent in a memory suffix is not one", workloadJSON(podSetJSON("a", 1, `{"name":"c","resources":{"requests":{"memory":"1Ei"}}}`)), "", "", ""},
		{"lendingLimit just under", strings.Replace(clusterQueueJSON("lendingLimit", maxMilli), `"nominalQuota":"1"`, `"nominalQuota":"`+maxMilli+`"`, 1), "", "", ""},
	})
	// A lendingLimit over int64 is also over any nominalQuota: two errors.
	_, errs := decodeValidate(t, clusterQueueJSON("lendingLimit", overMilli))
	lp := "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"
	want := []FieldError{
		{Object: "ClusterQueue/cq", Field: lp, Message: `Invalid value: "9223372036854775808m": must fit in int64 milli-units (at most 9223372036854775807m)`},
		{Object: "ClusterQueue/cq", Field: lp, Message: `Invalid value: "9223372036854775808m": ` + lendingLimitMsg},
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("lendingLimit over int64 (-want +got):\n%s", diff)
	}
}

// TestPodSetBounds: at most MaxPodSets podSets and a count of at most
// MaxPodSetCount, for Workloads and for Jobs.
func TestPodSetBounds(t *testing.T) {
	const wl = "Workload/ns/w"
	podSets := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = podSetJSON(fmt.Sprintf("p%d", i), 1, cpuContainer("1"))
		}
		return out
	}
	job := func(parallelism int64) string {
		return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"namespace":"ns","name":"j","labels":{"kueue.x-k8s.io/queue-name":"q"}},`+
			`"spec":{"parallelism":%d,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c"}]}}}}`, parallelism)
	}
	runLimitCases(t, []limitCase{
		{"MaxPodSets podSets", workloadJSON(podSets(MaxPodSets)...), "", "", ""},
		{"one podSet too many", workloadJSON(podSets(MaxPodSets + 1)...), wl, "spec.podSets", "must have at most 8 items"},
		{"count at the cap", workloadJSON(podSetJSON("a", MaxPodSetCount, cpuContainer("1"))), "", "", ""},
		{"count one over the cap", workloadJSON(podSetJSON("a", MaxPodSetCount+1, cpuContainer("1"))),
			wl, "spec.podSets[0].count", "must be less than or equal to 1000000"},
		{"count 2147483647", workloadJSON(podSetJSON("a", 2147483647, cpuContainer("1"))),
			wl, "spec.podSets[0].count", "must be less than or equal to 1000000"},
		{"Job at the cap", job(MaxPodSetCount), "", "", ""},
		{"Job one over the cap", job(MaxPodSetCount + 1), "Job/ns/j", "spec.parallelism", "must be less than or equal to 1000000"},
	})
}

// TestMaxDocuments: MaxDocuments objects decode, one more is an error
// naming the first object over the limit, and nothing after it is read (a
// broken document after it reports nothing).
func TestMaxDocuments(t *testing.T) {
	rf := func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"f%d"}}`, i)
	}
	rfs := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = rf(i)
		}
		return out
	}
	const broken = "{this is: [not valid"
	cases := []struct {
		name      string
		doc       string
		wantObjs  int
		wantError *FieldError
	}{
		{"YAML stream at the limit", strings.Join(rfs(MaxDocuments), "\n---\n"), MaxDocuments, nil},
		{"YAML stream one over", strings.Join(append(rfs(MaxDocuments+1), broken), "\n---\n"), MaxDocuments,
			&FieldError{Object: "document 1001", Message: "too many objects: at most 1000 per request"}},
		{"JSON array at the limit", "[" + strings.Join(rfs(MaxDocuments), ",") + "]", MaxDocuments, nil},
		{"JSON array one over", "[" + strings.Join(append(rfs(MaxDocuments+1), `"x"`), ",") + "]", MaxDocuments,
			&FieldError{Object: "document 1, items[1000]", Message: "too many objects: at most 1000 per request"}},
		{"List one over", `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(rfs(MaxDocuments+1), ",") + `]}`, MaxDocuments,
			&FieldError{Object: "document 1, items[1000]", Message: "too many objects: at most 1000 per request"}},
		{"broken documents count too", strings.Repeat(broken+"\n---\n", MaxDocuments+5), 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.doc))
			if len(objs) != tc.wantObjs {
				t.Errorf("decoded %d objects, want %d", len(objs), tc.wantObjs)
			}
			errs := asErrors(t, err)
			if tc.name == "broken documents count too" {
				if len(errs) != MaxDocuments+1 || errs[MaxDocuments].Message != fmt.Sprintf(tooManyDocsMsg, MaxDocuments) {
					t.Fatalf("want %d errors ending with the limit, got %d", MaxDocuments+1, len(errs))
				}
				return
			}
			var want []FieldError
			if tc.wantError != nil {
				want = []FieldError{*tc.wantError}
			}
			if diff := cmp.Diff(want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
