package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// visibilityWorld: one cpu, a PodsReady timeout of 1m requeuing by
// eviction time after a 10s backoff.
var visibilityWorld = `
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  blockAdmission: false
  timeout: 1m
  requeuingStrategy: {timestamp: Eviction, backoffBaseSeconds: 10}
` + "---" + oneQueue("1")

// pendingSummary is Kueue's PendingWorkloadsSummary as a client reads it.
type pendingSummary struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Items      []struct {
		metav1.ObjectMeta      `json:"metadata"`
		Priority               int32  `json:"priority"`
		LocalQueueName         string `json:"localQueueName"`
		PositionInClusterQueue int32  `json:"positionInClusterQueue"`
		PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
	} `json:"items"`
}

// rawGet reads a path as `kubectl get --raw` does, with client-go's REST
// client, which turns a metav1.Status error body into an
// *apierrors.StatusError.
func (s *system) rawGet(path string) (pendingSummary, error) {
	s.t.Helper()
	rc, err := rest.UnversionedRESTClientFor(&rest.Config{Host: s.base,
		ContentConfig: rest.ContentConfig{NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		s.t.Fatal(err)
	}
	var out pendingSummary
	// As kubectl get --raw does it (kubectl/pkg/cmd/get RawGet): the
	// request URI, streamed.
	body, err := rc.Get().RequestURI(path).Stream(context.Background())
	if err != nil {
		return out, err
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s: %v: %s", path, err, raw)
	}
	return out, nil
}

// TestVisibilityAsKueueServesIt: the pending list is in the admission
// queue's order, which after a PodsReady timeout (timestamp Eviction) is
// not creation order; every version Kueue served answers it; limit and
// offset follow Kueue's rules; errors are metav1.Status.
func TestVisibilityAsKueueServesIt(t *testing.T) {
	s := startWith(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(visibilityWorld))
	// w0, w1, w2 are created in that order (1 ms apart); only w0 fits.
	for i := range 3 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	// w0 misses its PodsReady deadline: evicted at 1m, requeued by its
	// eviction time once its 10s backoff is over. w1 takes the cpu and
	// becomes ready in time.
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"1m"}`))
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/w1/podsready", nil)
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"11s"}`))
	s.sync()
	if got := s.evictedSince(new(uint64)); !cmp.Equal(got, map[string]string{"ns/w0": "PodsReadyTimeout"}) {
		t.Fatalf("evictions %v, want w0's PodsReady timeout only", got)
	}

	// Creation order would put w0 first; its queue time is now its
	// eviction, after w2's creation.
	want := []string{"w2", "w0"}
	for _, v := range []string{"v1alpha1", "v1beta1", "v1beta2"} {
		for _, path := range []string{"/apis/visibility.kueue.x-k8s.io/" + v + "/clusterqueues/cq/pendingworkloads",
			"/apis/visibility.kueue.x-k8s.io/" + v + "/namespaces/ns/localqueues/lq/pendingworkloads"} {
			got, err := s.rawGet(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if got.Kind != "PendingWorkloadsSummary" || got.APIVersion != "visibility.kueue.x-k8s.io/"+v {
				t.Errorf("%s: kind %q apiVersion %q", path, got.Kind, got.APIVersion)
			}
			var names []string
			for i, it := range got.Items {
				names = append(names, it.Name)
				if it.Namespace != "ns" || it.LocalQueueName != "lq" || it.PositionInClusterQueue != int32(i) || it.PositionInLocalQueue != int32(i) {
					t.Errorf("%s: item %d %+v", path, i, it)
				}
			}
			if !cmp.Equal(names, want) {
				t.Errorf("%s: order %v, want %v (w0 requeued by its eviction time)", path, names, want)
			}
		}
	}

	// limit and offset: 0 means 1000; offset skips; positions stay.
	base := "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads"
	for q, wantItems := range map[string][]string{"?limit=0": {"w2", "w0"}, "?limit=1": {"w2"}, "?offset=1": {"w0"}, "?offset=2": nil} {
		got, err := s.rawGet(base + q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var names []string
		for _, it := range got.Items {
			names = append(names, it.Name)
		}
		if !cmp.Equal(names, wantItems) {
			t.Errorf("%s: %v, want %v", q, names, wantItems)
		}
		if q == "?offset=1" && len(got.Items) == 1 && got.Items[0].PositionInClusterQueue != 1 {
			t.Errorf("%s: position %d, want 1", q, got.Items[0].PositionInClusterQueue)
		}
	}

	// Errors are metav1.Status, which client-go decodes.
	for _, c := range []struct {
		path   string
		check  func(error) bool
		detail string
	}{
		{"/apis/visibility.kueue.x-k8s.io/v1alpha1/clusterqueues/nope/pendingworkloads", apierrors.IsNotFound, "clusterqueue"},
		{"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/nope/pendingworkloads", apierrors.IsNotFound, "localqueue"},
		{base + "?limit=-1", apierrors.IsBadRequest, ""},
		{base + "?limit=10001", apierrors.IsBadRequest, ""},
		{base + "?offset=x", apierrors.IsBadRequest, ""},
		{"/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/cq/pendingworkloads", apierrors.IsNotFound, ""},
	} {
		_, err := s.rawGet(c.path)
		if !c.check(err) {
			t.Errorf("%s: %v (%T), want a Status of the right reason", c.path, err, err)
			continue
		}
		st := err.(apierrors.APIStatus).Status()
		if strings.Contains(c.path, "/v1/") && !strings.Contains(st.Message, "serves only visibility.kueue.x-k8s.io's pendingworkloads, at v1alpha1, v1beta1, v1beta2") {
			t.Errorf("%s: %q, want the server's own Status naming the served versions", c.path, st.Message)
		}
		if c.detail != "" && (st.Details == nil || st.Details.Kind != c.detail || st.Details.Name != "nope" ||
			st.Details.Group != "visibility.kueue.x-k8s.io") {
			t.Errorf("%s: details %+v", c.path, st.Details)
		}
	}

	// A stopped LocalQueue's workloads are in no queue (the engine holds
	// them out; Kueue drops them from its queues): neither listed nor
	// counted in another's position, whether stopped by Hold or
	// HoldAndDrain.
	s.must(http.StatusOK, "POST", "/v1/apply", []byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: other, namespace: ns}\nspec: {clusterQueue: cq}\n"))
	s.must(http.StatusAccepted, "POST", "/v1/workloads", []byte(strings.Replace(string(cpuWorkload("o0")), `"queueName":"lq"`, `"queueName":"other"`, 1)))
	s.sync()
	positions := func(path string) []string {
		t.Helper()
		got, err := s.rawGet(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var out []string
		for _, it := range got.Items {
			out = append(out, fmt.Sprintf("%s/%s %d %d", it.LocalQueueName, it.Name, it.PositionInClusterQueue, it.PositionInLocalQueue))
		}
		return out
	}
	lqPath := "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/lq/pendingworkloads"
	if d := cmp.Diff([]string{"lq/w2 0 0", "lq/w0 1 1", "other/o0 2 0"}, positions(base)); d != "" {
		t.Errorf("two LocalQueues running (-want,+got):\n%s", d)
	}
	for _, policy := range []string{"Hold", "HoldAndDrain"} {
		s.must(http.StatusOK, "POST", "/v1/apply", []byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq, stopPolicy: "+policy+"}\n"))
		s.sync()
		// Under Hold, w1 keeps the cpu and o0 waits first in line; under
		// HoldAndDrain, w1 is evicted and held, and o0 takes the cpu.
		want := map[string][]string{"Hold": {"other/o0 0 0"}, "HoldAndDrain": nil}[policy]
		if d := cmp.Diff(want, positions(base)); d != "" {
			t.Errorf("lq stopped by %s: ClusterQueue's list (-want,+got):\n%s", policy, d)
		}
		if got := positions(lqPath); len(got) != 0 {
			t.Errorf("lq stopped by %s: its own list %v, want none", policy, got)
		}
	}
}
