package ingest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/services/ingest/projector"
)

// project runs the projector behind a front door until the test ends.
func (f *frontDoor) runProjector(t *testing.T) {
	t.Helper()
	leases, ttl, err := bus.EnsureLeaseBucket(t.Context(), f.js, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rebuild := make(chan chan error)
	go func() {
		_ = projector.Run(t.Context(), projector.Config{JS: f.js, Stream: f.stream, Store: f.store, Rebuild: rebuild,
			Leader: bus.NewLeadership(leases, projector.LeaseKey, "test", ttl)})
	}()
}

// waitProjected waits until the projection holds the whole stream.
func (f *frontDoor) waitProjected(t *testing.T) {
	t.Helper()
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !f.waitProjection(t.Context(), info.State.LastSeq) {
		t.Fatal("the projection did not catch up")
	}
}

// TestObjectListsShowOnlyWhatTheCallerMaySee: a list of Workload objects
// across namespaces holds only the namespaces where the caller may list
// workloads, and a watch across namespaces streams only those.
func TestObjectListsShowOnlyWhatTheCallerMaySee(t *testing.T) {
	g := newGuarded(t, false, true)
	g.runProjector(t)
	for _, w := range []struct{ ns, name string }{{"team-a", "wa"}, {"team-b", "wb"}} {
		if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", nsWorkload(w.ns, w.name)); code != http.StatusAccepted {
			t.Fatalf("submit: %d %s", code, body)
		}
	}
	g.waitProjected(t)
	for _, tc := range []struct {
		token string
		want  []string
	}{{"alice-token", []string{"team-a/wa"}}, {"bob-token", []string{"team-b/wb"}}, {"vera-token", []string{"team-a/wa", "team-b/wb"}}} {
		code, _, body := g.call(t, tc.token, "GET", "/apis/kueue.x-k8s.io/v1beta1/workloads", "")
		var list struct {
			Items []struct {
				Metadata struct{ Namespace, Name string }
			} `json:"items"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("list as %s: %d %s", tc.token, code, body)
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, it.Metadata.Namespace+"/"+it.Metadata.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("list as %s (-want,+got):\n%s", tc.token, diff)
		}
		code, _, body = g.call(t, tc.token, "GET", "/apis/kueue.x-k8s.io/v1beta1/workloads?watch=true&timeoutSeconds=1", "")
		got = nil
		dec := json.NewDecoder(strings.NewReader(body))
		for dec.More() {
			var ev struct {
				Type   string
				Object struct {
					Metadata struct{ Namespace, Name string }
				}
			}
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("watch as %s: %v: %s", tc.token, err, body)
			}
			got = append(got, ev.Object.Metadata.Namespace+"/"+ev.Object.Metadata.Name)
		}
		if diff := cmp.Diff(tc.want, got); code != http.StatusOK || diff != "" {
			t.Errorf("watch as %s: %d (-want,+got):\n%s", tc.token, code, diff)
		}
	}
}

// TestWatchesAreBounded: one caller holds at most
// --max-watches-per-caller watches at once; one more is 429 naming
// watch, with Retry-After, and a place freed is free again.
func TestWatchesAreBounded(t *testing.T) {
	g := newGuarded(t, false, true)
	g.cfg.HTTP.MaxWatchesPerCaller = 2
	path := "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true&timeoutSeconds=3"
	var open []*http.Response
	for range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+path, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %v %v", err, resp)
		}
		open = append(open, resp)
	}
	code, header, body := g.call(t, "alice-token", "GET", path, "")
	var st metav1.Status
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &st) != nil || st.Reason != metav1.StatusReasonTooManyRequests ||
		!strings.HasPrefix(st.Message, "watch: too many watches") || header.Get("Retry-After") == "" {
		t.Errorf("a third watch: %d %s %v, want a 429 Status on watch with Retry-After", code, body, header)
	}
	if code, _, body := g.call(t, "vera-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues?watch=true&timeoutSeconds=1", ""); code != http.StatusOK {
		t.Errorf("another caller's watch: %d %s", code, body)
	}
	open[0].Body.Close()
	for _, r := range open[1:] {
		defer r.Body.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _, _ := g.call(t, "alice-token", "GET", strings.Replace(path, "timeoutSeconds=3", "timeoutSeconds=1", 1), "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed watch's place was not freed: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestActiveNamesItsField: spec.active is set only by {"active": bool};
// anything else is 400 on "active" and publishes nothing.
func TestActiveNamesItsField(t *testing.T) {
	f := newFrontDoor(t)
	if code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload("w", "1")); code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	before := f.messages(t)
	for _, body := range []string{``, `{}`, `{"active":"no"}`, `{"active":false,"x":1}`} {
		code, _, out := f.do(t, "POST", "/v1/workloads/ns/w/active", nil, body)
		if code != http.StatusBadRequest || fieldOf(t, out) != "active" && body != `` {
			t.Errorf("body %q: %d %s, want 400 on active", body, code, out)
		}
	}
	if after := f.messages(t); after != before {
		t.Errorf("refused requests published %d events", after-before)
	}
	if code, _, body := f.do(t, "POST", "/v1/workloads/ns/w/active", nil, `{"active":false}`); code != http.StatusAccepted {
		t.Fatalf("stop: %d %s", code, body)
	}
	if code, _, _ := f.do(t, "POST", "/v1/workloads/ns/nope/active", nil, `{"active":true}`); code != http.StatusNotFound {
		t.Errorf("an unknown workload: %d, want 404", code)
	}
}
