package ingest

import (
	"encoding/json"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEverythingUnderApisAnswersStatus: under /apis/ every answer that is
// not a success is a metav1.Status with the reason of its code, as a
// Kubernetes API server's.
func TestEverythingUnderApisAnswersStatus(t *testing.T) {
	f := newFrontDoor(t)
	for _, c := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
	}{
		{"POST", "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads", 405, metav1.StatusReasonMethodNotAllowed},
		{"GET", "/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/cq/pendingworkloads", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/other.example.com/v1/things", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads?limit=1.5", 400, metav1.StatusReasonBadRequest},
	} {
		code, hdr, body := f.do(t, c.method, c.path, nil, "")
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || code != c.code || st.Kind != "Status" || st.APIVersion != "v1" ||
			st.Status != metav1.StatusFailure || st.Reason != c.reason || st.Code != int32(c.code) || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s, want a %d Status with reason %s", c.method, c.path, code, body, c.code, c.reason)
		}
	}
	// Outside /apis/ errors keep the API's own shape.
	if code, _, body := f.do(t, "GET", "/v1/workloads?limit=0", nil, ""); code != http.StatusBadRequest || fieldOf(t, body) != "limit" {
		t.Errorf("GET /v1/workloads?limit=0: %d %s", code, body)
	}
}
