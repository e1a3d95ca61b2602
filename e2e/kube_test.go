package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/kube/kubefake"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/testenv"
	"github.com/jetqueue/jetqueue/services/ingest/bridge"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

const kubeWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {instance-type: spot}
  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: user-queue, namespace: team-a}
spec: {clusterQueue: cq}
`

// TestKubeBridgeAdmitsJobs runs ingest with the Kubernetes bridge on a fake
// API server next to the real admission service: a labelled Job is
// suspended, submitted, admitted, started with its flavor's nodeSelector
// and toleration, and its workload finishes when the Job completes.
func TestKubeBridgeAdmitsJobs(t *testing.T) {
	s, kube := startKube(t, false)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(kubeWorld))

	ctx := t.Context()
	jobs := kube.BatchV1().Jobs("team-a")
	if _, err := jobs.Create(ctx, kubeJob("train"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	type started struct {
		Suspended    bool
		NodeSelector map[string]string
		Tolerations  []corev1.Toleration
		Admitted     bool
	}
	want := started{NodeSelector: map[string]string{"instance-type": "spot"}, Admitted: true,
		Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	poll(t, "the Job is admitted and started on the spot flavor", func() error {
		j, err := jobs.Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, admitted := j.Annotations[bridge.AnnotationAdmission]
		got := started{Suspended: j.Spec.Suspend != nil && *j.Spec.Suspend, NodeSelector: j.Spec.Template.Spec.NodeSelector,
			Tolerations: j.Spec.Template.Spec.Tolerations, Admitted: admitted}
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("(-want,+got):\n%s", d)
		}
		return nil
	})
	var v view
	s.sync()
	if s.call("GET", "/v1/workloads/team-a/train", nil, &v); v.Status != "admitted" || v.Assignment["main"]["cpu"] != "spot" {
		t.Fatalf("workload: %+v", v)
	}

	j, err := jobs.Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status.Succeeded = 2
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the completed Job's workload is finished", func() error {
		s.sync()
		var v view
		if s.call("GET", "/v1/workloads/team-a/train", nil, &v); v.Status != "finished" {
			return fmt.Errorf("status %q", v.Status)
		}
		return nil
	})
}

// startKube starts the deciders and an ingest running the bridge on a
// fake API server.
func startKube(t *testing.T, manual bool) (*system, *fake.Clientset) {
	srv := testenv.NATS(t)
	s := &system{t: t, nats: srv.ClientURL(), db: testenv.Postgres(t), manual: manual}
	t.Cleanup(s.close)
	s.startAdmission("a")
	s.startPreemptor("a")
	s.startPodsReady("a")
	kube := kubefake.NewClientset()
	s.stopIngest = s.startKubeIngest(kube)
	return s, kube
}

// startKubeIngest starts an ingest running the bridge, points the client
// at it, and returns its stop.
func (s *system) startKubeIngest(kube *fake.Clientset) func() {
	s.t.Helper()
	addr := make(chan string, 1)
	stop := s.run("ingest", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.nats, DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0", Auth: auth.Options{Anonymous: true},
			ManualClock: s.manual, KubeBridge: true, Kube: kube, Listening: func(a string) { addr <- a }})
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-time.After(time.Minute):
		s.t.Fatal("ingest did not start")
	}
	return stop
}

// TestKubeBridgeFailsOver: two ingest instances run with the bridge on
// one cluster, each through a clientset of its own over the same objects,
// so that every API call is attributed to the instance that made it. Only
// the holder of the "kube-bridge" lease ever calls the API server (a
// standby does not even watch); when the holder stops, the lease moves to
// the other, which takes over (the second Job is only started if it
// does). Every Job is submitted once.
func TestKubeBridgeFailsOver(t *testing.T) {
	s, kube := startKube(t, false)
	stops := map[string]func(){"a": s.stopIngest}
	views := map[string]*fake.Clientset{"a": nil}
	// startKube's instance uses the shared clientset itself: give the
	// test two views instead, and stop it at once.
	s.stopIngest()
	bases := map[string]string{}
	for _, name := range []string{"a", "b"} {
		views[name] = kubeView(kube)
		stops[name] = s.startKubeIngest(views[name])
		bases[name] = s.base
	}
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(kubeWorld))
	ctx := t.Context()
	jobs := kube.BatchV1().Jobs("team-a")
	started := func(name string) func() error {
		return func() error {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Spec.Suspend == nil || *j.Spec.Suspend {
				return fmt.Errorf("%s is suspended", name)
			}
			return nil
		}
	}
	if _, err := jobs.Create(ctx, kubeJob("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the first Job is started", started("first"))
	holder := s.leaseHolder("kube-bridge")
	if holder == "" {
		t.Fatal("nobody holds the kube-bridge lease")
	}
	// The standby has not called the API server at all so far.
	acting, standby := onlyOneActs(t, views)
	// Stop the instance that acted; the lease it held must move.
	stops[acting]()
	s.base = bases[standby]
	before := writes(views[acting])
	poll(t, "the lease moves to the standby", func() error {
		if now := s.leaseHolder("kube-bridge"); now == "" || now == holder {
			return fmt.Errorf("lease held by %q; the stopped holder was %q", now, holder)
		}
		return nil
	})
	if _, err := jobs.Create(ctx, kubeJob("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the second Job is started by the other ingest", started("second"))
	if n := writes(views[standby]); n == 0 {
		t.Error("the new holder started the second Job without a write of its own")
	}
	if n := writes(views[acting]); n != before {
		t.Errorf("the stopped instance wrote %d times after it stopped", n-before)
	}
	s.sync()
	if got := s.eventsPerWorkload(events.WorkloadSubmitted); got["team-a/first"] != 1 || got["team-a/second"] != 1 || len(got) != 2 {
		t.Errorf("submissions %v, want each Job once", got)
	}
}

// onlyOneActs finds the one instance that called the API server and
// fails if the other did too: two bridges acting at once.
func onlyOneActs(t *testing.T, views map[string]*fake.Clientset) (acting, standby string) {
	t.Helper()
	for name, v := range views {
		if len(v.Actions()) > 0 {
			if acting != "" {
				t.Fatalf("both instances called the API server (%s: %d writes, %s: %d writes): the lease did not keep one bridge",
					acting, writes(views[acting]), name, writes(v))
			}
			acting = name
		} else {
			standby = name
		}
	}
	if acting == "" || standby == "" {
		t.Fatalf("acting %q, standby %q", acting, standby)
	}
	return acting, standby
}

// kubeView is a clientset of its own over the objects of shared: every
// call goes to shared's API, and the view records the calls made through
// it.
func kubeView(shared *fake.Clientset) *fake.Clientset {
	v := fake.NewClientset()
	v.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := shared.Invokes(a, nil)
		return true, obj, err
	})
	v.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := shared.InvokesWatch(a)
		return true, w, err
	})
	return v
}

// writes counts the calls through a view that change objects.
func writes(v *fake.Clientset) int {
	n := 0
	for _, a := range v.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			n++
		}
	}
	return n
}

// kubeJob is a labelled Job of two pods of 1 cpu.
func kubeJob(name string) *batchv1.Job {
	two := int32(2)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("6f1c1c4e-0000-4000-8000-" + fmt.Sprintf("%012x", len(name))),
			Labels: map[string]string{"kueue.x-k8s.io/queue-name": "user-queue"}},
		Spec: batchv1.JobSpec{Parallelism: &two, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}},
	}
}

// TestKubeBridgeFollowsPodsReady runs waitForPodsReady through the bridge
// on the manual clock: a started Job whose pods are not ready in time is
// suspended again with its original template; once requeued it is started
// again, and when its pods are ready the bridge reports PodsReady and no
// timeout follows.
func TestKubeBridgeFollowsPodsReady(t *testing.T) {
	s, kube := startKube(t, true)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(kubeWorld+`---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  timeout: 1m
  requeuingStrategy: {backoffBaseSeconds: 10}
`))
	ctx := t.Context()
	jobs := kube.BatchV1().Jobs("team-a")
	if _, err := jobs.Create(ctx, kubeJob("slow"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	state := func(wantSuspended bool, wantSelector string) func() error {
		return func() error {
			j, err := jobs.Get(ctx, "slow", metav1.GetOptions{})
			if err != nil {
				return err
			}
			suspended := j.Spec.Suspend != nil && *j.Spec.Suspend
			if suspended != wantSuspended || j.Spec.Template.Spec.NodeSelector["instance-type"] != wantSelector {
				return fmt.Errorf("suspended %v, nodeSelector %v", suspended, j.Spec.Template.Spec.NodeSelector)
			}
			return nil
		}
	}
	poll(t, "the Job is started", state(false, "spot"))
	s.sync()
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"1m"}`))
	poll(t, "the timed-out Job is suspended with its original template", state(true, ""))
	s.sync()
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"10s"}`))
	poll(t, "the requeued Job is started again", state(false, "spot"))

	j, err := jobs.Get(ctx, "slow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := int32(2)
	j.Status.Ready = &ready
	if _, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the bridge reports PodsReady", func() error {
		if n := s.eventsPerWorkload(events.PodsReady)["team-a/slow"]; n != 1 {
			return fmt.Errorf("%d PodsReady events", n)
		}
		return nil
	})
	s.sync()
	s.must(http.StatusOK, "POST", "/v1/debug/clock/advance", []byte(`{"duration":"5m"}`))
	s.sync()
	if n := s.eventsPerWorkload(events.Evicted)["team-a/slow"]; n != 1 {
		t.Errorf("%d evictions, want the one timeout before its pods were ready", n)
	}
	poll(t, "the ready Job keeps running", state(false, "spot"))
}

// poll checks until check passes or a deadline, failing with its last
// error: the services and the bridge converge asynchronously.
func poll(t testing.TB, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, 30*time.Second, check)
}
