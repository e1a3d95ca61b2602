package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/kube/kubefake"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/testenv"
)

// fakeAPI stands in for ingest behind the bridge's API seam: it records
// each call and publishes the event ingest would to a real JetStream, so
// that the bridge learns of its own actions through the log, as in
// production. Submissions follow ingest's rules: the same Idempotency-Key
// again is 200 and publishes nothing, another under a live name is 409.
type fakeAPI struct {
	js jetstream.JetStream

	mu    sync.Mutex
	calls []string          // "POST /v1/workloads ns/name", "POST podsready ns/name", ...
	live  map[string]string // namespace/name → submission id
}

// refuseLabel marks a Job the fake API refuses as invalid.
const refuseLabel = "test.jetqueue.io/refuse"

func submissionID(ns, key string) string { return "submit/" + ns + "/" + key }

func (f *fakeAPI) Do(ctx context.Context, method, path string, header http.Header, body []byte) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if method == http.MethodPost && path == "/v1/workloads" {
		var job batchv1.Job
		if err := json.Unmarshal(body, &job); err != nil {
			return http.StatusBadRequest, []byte(err.Error()), nil
		}
		key := job.Namespace + "/" + job.Name
		f.calls = append(f.calls, "submit "+key)
		id := submissionID(job.Namespace, header.Get("Idempotency-Key"))
		if have, ok := f.live[key]; ok {
			if have == id {
				return http.StatusOK, nil, nil
			}
			return http.StatusConflict, nil, nil
		}
		if job.Labels[refuseLabel] != "" {
			return http.StatusBadRequest, []byte(`{"errors":[{"object":"Workload/` + key + `","field":"spec.podSets[0].template.spec.containers[0].resources.requests.cpu","message":"must be non-negative"}]}`), nil
		}
		if job.Spec.Suspend == nil || !*job.Spec.Suspend || job.Annotations[AnnotationAdmission] != "" {
			return http.StatusBadRequest, []byte("the bridge submits the Job suspended, as the user wrote it"), nil
		}
		wl, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": string(job.UID)}})
		ev := events.Event{ID: id, Type: events.WorkloadSubmitted, Source: "test", Time: time.Now(),
			Subject: events.WorkloadSubject(job.Namespace, job.Name),
			Data:    &events.WorkloadSubmittedData{WorkloadRef: ref(job.Namespace, job.Name), Workload: wl, CreatedAt: time.Now()}}
		if _, _, err := bus.Publish(ctx, f.js, ev, nil); err != nil {
			return 0, nil, err
		}
		f.live[key] = id
		return http.StatusAccepted, nil, nil
	}
	rest, ok := strings.CutPrefix(path, "/v1/workloads/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 {
		return http.StatusNotFound, nil, nil
	}
	ns, name, verb := parts[0], parts[1], ""
	if len(parts) == 3 {
		verb = parts[2]
	}
	key := ns + "/" + name
	if verb == "" {
		f.calls = append(f.calls, "delete "+key)
	} else {
		c := verb + " " + key
		if len(body) > 0 {
			c += " " + string(body)
		}
		f.calls = append(f.calls, c)
	}
	if _, ok := f.live[key]; !ok {
		return http.StatusNotFound, nil, nil
	}
	var typ events.Type
	var data any = &events.WorkloadRef{Namespace: ns, Name: name}
	switch {
	case method == http.MethodDelete && verb == "":
		typ = events.WorkloadDeleted
		delete(f.live, key)
	case verb == "finish":
		var in struct {
			Succeeded bool `json:"succeeded"`
		}
		_ = json.Unmarshal(body, &in)
		typ, data = events.WorkloadFinished, &events.WorkloadFinishedData{WorkloadRef: ref(ns, name), Succeeded: in.Succeeded}
	case verb == "podsready":
		typ = events.PodsReady
	default:
		return http.StatusNotFound, nil, nil
	}
	if _, _, err := bus.Publish(ctx, f.js, events.Event{ID: nuid.Next(), Type: typ, Source: "test", Time: time.Now(),
		Subject: events.WorkloadSubject(ns, name), Data: data}, nil); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, nil, nil
}

// callsOf lists the recorded calls that start with prefix.
func (f *fakeAPI) callsOf(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func ref(ns, name string) events.WorkloadRef { return events.WorkloadRef{Namespace: ns, Name: name} }

// env is one test's world: embedded NATS, the fake API and a fake cluster.
type env struct {
	t    *testing.T
	ctx  context.Context
	js   jetstream.JetStream
	api  *fakeAPI
	kube *fake.Clientset
}

func newEnv(t *testing.T, objs ...*batchv1.Job) *env {
	t.Helper()
	srv := testenv.NATS(t)
	ctx := t.Context()
	conn, err := bus.Open(ctx, srv.ClientURL(), "bridge-test", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	kube := kubefake.NewClientset()
	for _, j := range objs {
		if _, err := kube.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, ctx: ctx, js: conn.JS, api: &fakeAPI{js: conn.JS, live: map[string]string{}}, kube: kube}
}

// start runs a bridge until the returned stop is called (or the test
// ends), and returns once it reconciles.
func (e *env) start() (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	synced := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Kube: e.kube, API: e.api, JS: e.js, SubmissionID: submissionID, Synced: func() { close(synced) }})
	}()
	select {
	case <-synced:
	case err := <-done:
		e.t.Fatalf("bridge stopped before reconciling: %v", err)
	case <-time.After(10 * time.Second):
		e.t.Fatal("bridge did not sync")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("bridge: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// publish appends an event to JQ_EVENTS, as admission or ingest would.
func (e *env) publish(typ events.Type, subject string, data any) {
	e.t.Helper()
	if _, _, err := bus.Publish(e.ctx, e.js, events.Event{ID: nuid.Next(), Type: typ, Source: "test", Time: time.Now(),
		Subject: subject, Data: data}.FromOwner(), nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) flavor(name string, spec api.ResourceFlavorSpec) {
	e.t.Helper()
	obj, _ := json.Marshal(api.ResourceFlavor{TypeMeta: metav1.TypeMeta{APIVersion: api.KueueAPIVersion, Kind: api.KindResourceFlavor},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	e.publish(events.ConfigApplied, events.ConfigSubject(api.KindResourceFlavor, "", name),
		&events.ConfigAppliedData{ConfigRef: events.ConfigRef{Kind: api.KindResourceFlavor, Name: name}, Object: obj})
}

// admit publishes a QuotaReserved of the Job's podSet on flavor (cpu).
func (e *env) admit(ns, name, flavor string, count int32) {
	e.t.Helper()
	e.publish(events.QuotaReserved, events.WorkloadSubject(ns, name), &events.QuotaReservedData{WorkloadRef: ref(ns, name),
		Admission: scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: count,
			Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: flavor}, Usage: map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000}}}}})
}

func (e *env) evict(ns, name, reason string) {
	e.t.Helper()
	e.publish(events.Evicted, events.WorkloadSubject(ns, name), &events.EvictedData{WorkloadRef: ref(ns, name), Reason: reason})
}

func (e *env) job(ns, name string) *batchv1.Job {
	e.t.Helper()
	j, err := e.kube.BatchV1().Jobs(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// editJob changes a Job as a user or the Job controller would.
func (e *env) editJob(ns, name string, edit func(*batchv1.Job)) {
	e.t.Helper()
	j := e.job(ns, name)
	edit(j)
	if _, err := e.kube.BatchV1().Jobs(ns).Update(e.ctx, j, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// eventually polls check until it returns nil, failing the test with its
// last error after a deadline: informers and the event follower converge
// asynchronously.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, 10*time.Second, check)
}

// newJob is a labelled Job as a user writes it.
func newJob(ns, name, uid string, parallelism int32, nodeSelector map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			Labels: map[string]string{api.QueueNameLabel: "lq"}},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector:  nodeSelector,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}
}

// jobState is what the tests compare of a Job.
type jobState struct {
	Suspended    bool
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Parallelism  int32
	Admitted     bool // carries AnnotationAdmission
	Original     bool // carries AnnotationOriginal
}

func stateOf(j *batchv1.Job) jobState {
	s := jobState{Suspended: suspended(j), NodeSelector: j.Spec.Template.Spec.NodeSelector,
		Tolerations: j.Spec.Template.Spec.Tolerations}
	if j.Spec.Parallelism != nil {
		s.Parallelism = *j.Spec.Parallelism
	}
	_, s.Admitted = j.Annotations[AnnotationAdmission]
	_, s.Original = j.Annotations[AnnotationOriginal]
	return s
}

// same is nil when got equals want, else their diff (-want,+got).
func same(what string, want, got any) error {
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		return fmt.Errorf("%s (-want,+got):\n%s", what, d)
	}
	return nil
}

// jobIs checks a Job's state.
func (e *env) jobIs(ns, name string, w jobState) func() error {
	return func() error { return same(ns+"/"+name, w, stateOf(e.job(ns, name))) }
}

// callsAre checks the calls of one kind made so far.
func (e *env) callsAre(prefix string, w ...string) func() error {
	return func() error { return same("calls "+prefix, w, e.api.callsOf(prefix)) }
}

// eventsAre checks the Events recorded on a Job: "Reason: message" and how
// often each was recorded.
func (e *env) eventsAre(ns, name string, want map[string]int32) func() error {
	return func() error {
		list, err := e.kube.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]int32{}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind == "Job" && ev.InvolvedObject.Name == name && ev.Source.Component == eventComponent {
				got[ev.Reason+": "+ev.Message] += max(ev.Count, 1)
			}
		}
		return same("events of "+ns+"/"+name, want, got)
	}
}
