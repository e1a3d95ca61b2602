package ingest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetqueue/jetqueue/libs/store"
)

// labelled is workload i's labels: team a or b (none for every fifth),
// size i; the last one is team=last.
func labelled(i, n int) map[string]string {
	l := map[string]string{"size": strconv.Itoa(i)}
	switch {
	case i == n-1:
		l["team"] = "last"
	case i%5 == 0:
	case i%2 == 0:
		l["team"] = "a"
	default:
		l["team"] = "b"
	}
	return l
}

// submitLabelled submits workloads from..n-1 of n (named w000...) and
// projects them.
func (f *frontDoor) submitLabelled(t *testing.T, from, n int) {
	t.Helper()
	for i := from; i < n; i++ {
		md, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("w%03d", i), "namespace": "ns", "labels": labelled(i, n)})
		body := `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":` + string(md) + `,` +
			`"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
		if code, _, b := f.do(t, "POST", "/v1/workloads", nil, body); code != http.StatusAccepted {
			t.Fatalf("submit %d: %d %s", i, code, b)
		}
	}
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.project(t, info.State.LastSeq)
}

// listNames lists the object API's workloads of ns with the query, page
// after page, and returns the names and the number of pages.
func (f *frontDoor) listNames(t *testing.T, query url.Values) ([]string, int) {
	t.Helper()
	var names []string
	for pages := 1; ; pages++ {
		code, _, body := f.do(t, "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/ns/workloads?"+query.Encode(), nil, "")
		var list struct {
			Metadata struct{ Continue string }
			Items    []struct{ Metadata struct{ Name string } }
		}
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil {
			t.Fatalf("list %s: %d %s", query.Encode(), code, body)
		}
		for _, it := range list.Items {
			names = append(names, it.Metadata.Name)
		}
		if list.Metadata.Continue == "" {
			return names, pages
		}
		query.Set("continue", list.Metadata.Continue)
	}
}

// TestSelectorsAreEvaluatedInTheQuery: a list with a label selector
// that only the last of N workloads meets, limit=1, costs the same few
// queries whether N is 20 or 80 (it was one query per row).
func TestSelectorsAreEvaluatedInTheQuery(t *testing.T) {
	f := newFrontDoor(t)
	cfg, err := pgxpool.ParseConfig(f.db)
	if err != nil {
		t.Fatal(err)
	}
	queries := &countQueries{}
	cfg.ConnConfig.Tracer = queries
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	counted := &store.Store{Pool: pool}
	cost := func(n int) int64 {
		t.Helper()
		real := f.Server.store
		f.Server.store = counted
		defer func() { f.Server.store = real }()
		before := queries.n.Load()
		names, _ := f.listNames(t, url.Values{"labelSelector": {"team=last"}, "limit": {"1"}})
		if want := []string{fmt.Sprintf("w%03d", n-1)}; !cmp.Equal(want, names) {
			t.Fatalf("team=last of %d: %v, want %v", n, names, want)
		}
		return queries.n.Load() - before
	}
	f.submitLabelled(t, 0, 20)
	small := cost(20)
	// 60 more, the last again the only team=last once w019, the first
	// batch's last, is deleted.
	f.submitLabelled(t, 20, 80)
	if code, _, b := f.do(t, "DELETE", "/v1/workloads/ns/w019", nil, ""); code != http.StatusAccepted {
		t.Fatalf("delete w019: %d %s", code, b)
	}
	info, _ := f.stream.Info(t.Context())
	f.project(t, info.State.LastSeq)
	large := cost(80)
	if small != large || large > 3 {
		t.Errorf("limit=1 with a selector: %d queries over 20 workloads, %d over 80; want the same few (at most 3)", small, large)
	}
}

// TestSelectorsSelectAsKubernetes: every kind of label and field
// requirement selects in the database what apimachinery's Matches
// selects, and reading it one item per page yields the same list.
func TestSelectorsSelectAsKubernetes(t *testing.T) {
	f := newFrontDoor(t)
	const n = 23
	f.submitLabelled(t, 0, n)
	for _, tc := range []struct{ labels, fields string }{
		{labels: "team=a"}, {labels: "team==b"}, {labels: "team!=a"}, {labels: "team in (a,last)"},
		{labels: "team notin (a,b)"}, {labels: "team"}, {labels: "!team"}, {labels: "size>15"}, {labels: "size<3"},
		{labels: "size>7,team=b"}, {labels: "nosuch"}, {labels: "team=a,team=b"},
		{fields: "metadata.name=w004"}, {fields: "metadata.name!=w004"}, {fields: "status=pending"}, {fields: "status!=pending"},
		{fields: "spec.queueName=lq,metadata.name!=w000"}, {labels: "team=b", fields: "metadata.name!=w003"},
	} {
		var want []string
		ls, err := labels.Parse(tc.labels)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := fields.ParseSelector(tc.fields)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			name := fmt.Sprintf("w%03d", i)
			if ls.Matches(labels.Set(labelled(i, n))) &&
				fs.Matches(fields.Set{"metadata.name": name, "metadata.namespace": "ns", "status": "pending", "spec.queueName": "lq"}) {
				want = append(want, name)
			}
		}
		q := url.Values{}
		if tc.labels != "" {
			q.Set("labelSelector", tc.labels)
		}
		if tc.fields != "" {
			q.Set("fieldSelector", tc.fields)
		}
		q.Set("limit", "1000")
		got, _ := f.listNames(t, q)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v (-want,+got):\n%s", tc, diff)
		}
		q.Set("limit", "1")
		paged, pages := f.listNames(t, q)
		if diff := cmp.Diff(want, paged); diff != "" {
			t.Errorf("%+v one per page (-want,+got):\n%s", tc, diff)
		}
		if len(want) > 0 && pages > len(want) {
			t.Errorf("%+v: %d pages for %d items", tc, pages, len(want))
		}
	}
}
