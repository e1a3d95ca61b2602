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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

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
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.nats, DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0",
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
// one cluster; the lease holder acts, and when it stops the other takes
// over (the second Job is only started if it does). Every Job is
// submitted once; that alone would hold even with two active bridges,
// since submissions carry the Job's uid as Idempotency-Key.
func TestKubeBridgeFailsOver(t *testing.T) {
	s, kube := startKube(t, false)
	s.startKubeIngest(kube)
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
	s.stopIngest()
	if _, err := jobs.Create(ctx, kubeJob("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the second Job is started by the other ingest", started("second"))
	s.sync()
	if got := s.eventsPerWorkload(events.WorkloadSubmitted); got["team-a/first"] != 1 || got["team-a/second"] != 1 {
		t.Errorf("submissions %v, want each Job once", got)
	}
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
