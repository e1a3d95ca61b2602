package scorer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

func kubeNode(name string, labels map[string]string, taints []corev1.Taint, alloc corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.NodeSpec{Taints: taints}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

// kubePod is a pod with one container per requests list (nil: a container
// without requests), bound to node (empty: pending) in phase.
func kubePod(name, node string, phase corev1.PodPhase, containers ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for _, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: r}})
	}
	return p
}

func startKube(t *testing.T, client *fake.Clientset) *Inventory {
	t.Helper()
	inv := NewInventory()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runKube(ctx, client, inv) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitSynced(t, inv)
	return inv
}

// TestKubeInventory drives the informer path through the fake clientset:
// nodes and pods added, updated and deleted; a node's requested amounts are
// the charges of its non-terminal bound pods, defaults included.
func TestKubeInventory(t *testing.T) {
	ctx := context.Background()
	gpuTaint := []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	// Present before the informers start: the initial list.
	client := fake.NewClientset(
		kubeNode("n1", map[string]string{"zone": "a"}, nil, list("cpu", "8", "memory", "16Gi", "pods", "110")),
		kubePod("running", "n1", corev1.PodRunning, list("cpu", "2", "memory", "1Gi")),
	)
	inv := startKube(t, client)
	n1 := scoring.Node{Name: "n1", Labels: map[string]string{"zone": "a"},
		Allocatable: res("cpu", "8", "memory", "16Gi"), Requested: res("cpu", "2", "memory", "1Gi")}
	waitNodes(t, inv, []scoring.Node{n1})

	pods := client.CoreV1().Pods("ns")
	nodes := client.CoreV1().Nodes()
	mustDo := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("pods without requests are charged the defaults", func(t *testing.T) {
		// Two containers: one without any request (100m, 200Mi), one with
		// cpu only (200Mi).
		mustDo(pods.Create(ctx, kubePod("defaults", "n1", corev1.PodRunning, nil, list("cpu", "500m")), metav1.CreateOptions{}))
		n1.Requested = res("cpu", "2600m", "memory", "1424Mi")
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("pending and terminal pods are not counted", func(t *testing.T) {
		mustDo(pods.Create(ctx, kubePod("pending", "", corev1.PodPending, list("cpu", "1")), metav1.CreateOptions{}))
		mustDo(pods.Create(ctx, kubePod("done", "n1", corev1.PodSucceeded, list("cpu", "1")), metav1.CreateOptions{}))
		mustDo(pods.Create(ctx, kubePod("failed", "n1", corev1.PodFailed, list("cpu", "1")), metav1.CreateOptions{}))
		// A marker pod created last proves the pods before it were handled.
		mustDo(pods.Create(ctx, kubePod("marker", "n1", corev1.PodRunning, list("cpu", "1m", "memory", "1")), metav1.CreateOptions{}))
		n1.Requested = plus(n1.Requested, res("cpu", "1m", "memory", "1"))
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("binding a pending pod counts it", func(t *testing.T) {
		mustDo(pods.Update(ctx, kubePod("pending", "n1", corev1.PodRunning, list("cpu", "1")), metav1.UpdateOptions{}))
		n1.Requested = plus(n1.Requested, res("cpu", "1", "memory", "200Mi"))
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("a pod that terminates is no longer counted", func(t *testing.T) {
		mustDo(pods.Update(ctx, kubePod("running", "n1", corev1.PodSucceeded, list("cpu", "2", "memory", "1Gi")), metav1.UpdateOptions{}))
		n1.Requested = plus(res("cpu", "1601m", "memory", "600Mi"), res("memory", "1"))
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("a deleted pod is no longer counted", func(t *testing.T) {
		if err := pods.Delete(ctx, "defaults", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Left: the marker and the pod bound later.
		n1.Requested = plus(res("cpu", "1001m", "memory", "200Mi"), res("memory", "1"))
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("node updates replace labels, taints and allocatable", func(t *testing.T) {
		mustDo(nodes.Update(ctx, kubeNode("n1", map[string]string{"zone": "b"}, gpuTaint, list("cpu", "16", "nvidia.com/gpu", "4")), metav1.UpdateOptions{}))
		n1.Labels, n1.Taints, n1.Allocatable = map[string]string{"zone": "b"}, gpuTaint, res("cpu", "16", "nvidia.com/gpu", "4")
		waitNodes(t, inv, []scoring.Node{n1})
	})
	t.Run("pods seen before their node count once it appears", func(t *testing.T) {
		mustDo(pods.Create(ctx, kubePod("early", "n2", corev1.PodRunning, list("cpu", "3", "memory", "1Gi", "nvidia.com/gpu", "1")), metav1.CreateOptions{}))
		mustDo(nodes.Create(ctx, kubeNode("n2", nil, nil, list("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "2")), metav1.CreateOptions{}))
		n2 := scoring.Node{Name: "n2", Allocatable: res("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "2"),
			Requested: res("cpu", "3", "memory", "1Gi", "nvidia.com/gpu", "1")}
		waitNodes(t, inv, []scoring.Node{n1, n2})
	})
	t.Run("a deleted node leaves the inventory", func(t *testing.T) {
		if err := nodes.Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		n2 := scoring.Node{Name: "n2", Allocatable: res("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "2"),
			Requested: res("cpu", "3", "memory", "1Gi", "nvidia.com/gpu", "1")}
		waitNodes(t, inv, []scoring.Node{n2})
	})
}

// TestPodCharge pins the charge of one pod: effective requests (limits
// standing in for requests, init containers and overhead as api.PodRequests
// computes them) plus the defaults of containers without cpu or memory.
func TestPodCharge(t *testing.T) {
	withLimits := kubePod("p", "n", corev1.PodRunning)
	withLimits.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: list("cpu", "1", "memory", "1Gi")}}}
	init := kubePod("p", "n", corev1.PodRunning, list("cpu", "1"))
	init.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: list("cpu", "4", "nvidia.com/gpu", "1")}}}
	init.Spec.Overhead = list("cpu", "250m")
	cases := []struct {
		name string
		pod  *corev1.Pod
		want scoring.Resources
	}{
		{"no containers", kubePod("p", "n", corev1.PodRunning), res()},
		{"one container without requests", kubePod("p", "n", corev1.PodRunning, nil), res("cpu", "100m", "memory", "200Mi")},
		{"explicit zero is no default", kubePod("p", "n", corev1.PodRunning, list("cpu", "0", "memory", "0")), res()},
		{"limits stand in for requests", withLimits, res("cpu", "1", "memory", "1Gi")},
		{"untracked names are dropped", kubePod("p", "n", corev1.PodRunning, list("cpu", "1", "memory", "1", "gpu", "1")), res("cpu", "1", "memory", "1")},
		// max(init 4, main 1) + overhead 250m; the main container lacks memory.
		{"init containers and overhead", init, res("cpu", "4250m", "nvidia.com/gpu", "1", "memory", "200Mi")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, PodCharge(tc.pod), nodeOpts); d != "" {
				t.Errorf("charge (-want +got):\n%s", d)
			}
			trimmed, _ := trimPod(tc.pod)
			if d := cmp.Diff(tc.want, PodCharge(trimmed.(*corev1.Pod)), nodeOpts); d != "" {
				t.Errorf("charge of the informer's trimmed copy (-want +got):\n%s", d)
			}
		})
	}
}

// TestKubeClient: a kubeconfig builds a client without contacting the
// cluster; without one, outside a cluster, the error says so.
func TestKubeClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := KubeClient(path); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := KubeClient(""); err == nil {
		t.Error("in-cluster config outside a cluster: no error")
	}
}
