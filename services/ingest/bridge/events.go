package bridge

import (
	"encoding/json"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// The reasons of the Events the bridge records on Jobs, so that
// `kubectl describe job` tells the story as it does under Kueue.
const (
	reasonCreatedWorkload = "CreatedWorkload"
	reasonStarted         = "Started"
	reasonStopped         = "Stopped"
	reasonSuspended       = "Suspended"
	reasonNotQueued       = "NotQueued"
)

// eventComponent is the Events' source.
const eventComponent = "jetqueue-kube-bridge"

// newRecorder records Events through the clientset; stop flushes and ends
// the broadcaster.
func newRecorder(kube kubernetes.Interface) (rec record.EventRecorder, stop func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent}), b.Shutdown
}

// notAdmitted says why a workload holds no quota, for the Job's Event.
func (w workload) notAdmitted() string {
	switch {
	case w.inactive:
		return "Workload deactivated"
	case w.evictedBy != "":
		return "Workload evicted: " + w.evictedBy
	}
	return "Workload not admitted"
}

// maxEventMessage keeps an Event's message within what the API server
// accepts (1 KiB).
const maxEventMessage = 1024

// eventMessage renders an API error answer ({"errors":[{"message":…}]})
// as one line.
func eventMessage(status int, answer []byte) string {
	var body struct {
		Errors []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	msg := strings.TrimSpace(string(answer))
	if json.Unmarshal(answer, &body) == nil && len(body.Errors) > 0 {
		var parts []string
		for _, e := range body.Errors {
			if e.Field != "" {
				parts = append(parts, e.Field+": "+e.Message)
			} else {
				parts = append(parts, e.Message)
			}
		}
		msg = strings.Join(parts, "; ")
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	return "Not queued: " + msg
}
