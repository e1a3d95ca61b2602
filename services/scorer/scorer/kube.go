package scorer

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/kube"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// KubeClient builds the scorer's clientset from a kubeconfig file, or
// from the pod's service account when path is empty.
func KubeClient(path string) (kubernetes.Interface, error) {
	return kube.Client(path, "jetqueue-scorer")
}

// kubeSource keeps an Inventory in step with a cluster through shared
// informers on Nodes and Pods. A node's requested amounts are the sum of
// the charges of the non-terminal pods bound to it, each charged as
// kube-scheduler's NonZeroRequested does (scoring.Pod.Charge: 100m cpu and
// 200Mi memory for every container without that request). Pods may be seen
// before their node; their charges wait in requested until it appears.
type kubeSource struct {
	inv *Inventory

	mu        sync.Mutex
	nodes     map[string]*corev1.Node
	requested map[string]scoring.Resources // by node name
	pods      map[types.UID]boundPod
}

// boundPod is what a counted pod adds to its node.
type boundPod struct {
	node   string
	charge scoring.Resources
}

func newKubeSource(inv *Inventory) *kubeSource {
	return &kubeSource{inv: inv, nodes: map[string]*corev1.Node{},
		requested: map[string]scoring.Resources{}, pods: map[types.UID]boundPod{}}
}

// runKube starts the informers, marks the inventory synced once both have
// delivered their initial lists, and returns when ctx ends.
func runKube(ctx context.Context, client kubernetes.Interface, inv *Inventory) error {
	k := newKubeSource(inv)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	pods := factory.Core().V1().Pods().Informer()
	if err := nodes.SetTransform(trimNode); err != nil {
		return err
	}
	if err := pods.SetTransform(trimPod); err != nil {
		return err
	}
	nreg, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.nodeEvent(obj, false) },
		UpdateFunc: func(_, obj any) { k.nodeEvent(obj, false) },
		DeleteFunc: func(obj any) { k.nodeEvent(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	preg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podEvent(obj, false) },
		UpdateFunc: func(_, obj any) { k.podEvent(obj, false) },
		DeleteFunc: func(obj any) { k.podEvent(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nreg.HasSynced, preg.HasSynced) {
		return ctx.Err()
	}
	inv.markSynced()
	<-ctx.Done()
	return nil
}

// trimNode and trimPod keep only what the inventory reads, so the
// informers' caches of a large cluster stay small (a node's images and
// conditions, a pod's managed fields and most of its spec are dropped).
// Anything else, such as a tombstone, passes unchanged.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}, nil
}

func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	keep := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead,
			Containers: keep(p.Spec.Containers), InitContainers: keep(p.Spec.InitContainers)},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// unwrap returns the object of an event, looking into the tombstone a
// delete carries when the watch missed the final state.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (k *kubeSource) nodeEvent(obj any, deleted bool) {
	n, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if deleted {
		delete(k.nodes, n.Name)
		k.inv.remove(n.Name)
		return
	}
	k.nodes[n.Name] = n
	k.publish(n.Name)
}

func (k *kubeSource) podEvent(obj any, deleted bool) {
	p, ok := unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old, had := k.pods[p.UID]
	if had {
		delete(k.pods, p.UID)
		k.add(old.node, old.charge, -1)
	}
	if !deleted && counted(p) {
		bp := boundPod{node: p.Spec.NodeName, charge: PodCharge(p)}
		k.pods[p.UID] = bp
		k.add(bp.node, bp.charge, 1)
	}
	if had {
		k.publish(old.node)
	}
	if bp, ok := k.pods[p.UID]; ok && (!had || bp.node != old.node) {
		k.publish(bp.node)
	}
}

// counted: a pod occupies its node from binding until it terminates.
func counted(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// add moves a node's requested amounts by sign×charge. The map is replaced,
// never modified, since inventory snapshots share it.
func (k *kubeSource) add(node string, charge scoring.Resources, sign int64) {
	r := maps.Clone(k.requested[node])
	if r == nil {
		r = scoring.Resources{}
	}
	for name, v := range charge {
		r[name] += sign * v
		if r[name] == 0 {
			delete(r, name)
		}
	}
	if len(r) == 0 {
		delete(k.requested, node)
		return
	}
	k.requested[node] = r
}

// publish stores a node's current state in the inventory, if the node is
// known.
func (k *kubeSource) publish(name string) {
	n, ok := k.nodes[name]
	if !ok {
		return
	}
	k.inv.put(name, scoring.Node{
		Name:        n.Name,
		Labels:      n.Labels,
		Taints:      n.Spec.Taints,
		Allocatable: scoring.NewResources(n.Status.Allocatable),
		Requested:   k.requested[name],
	})
}

// PodCharge is what a running pod requests of its node: its effective
// requests (api.PodRequests: init containers, sidecars and overhead
// included) plus the cpu/memory defaults of containers without them. A
// limit without a request counts as the request, as the API server
// defaults it.
func PodCharge(p *corev1.Pod) scoring.Resources {
	pod := podFromSpec(&p.Spec)
	return pod.Charge()
}

// podFromSpec is the scoring view of a pod spec: per-pod requests, the
// per-container keys that decide the defaults, node selector and
// tolerations.
func podFromSpec(spec *corev1.PodSpec) scoring.Pod {
	pod := scoring.Pod{Requests: scoring.Resources{}, NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations}
	for name, v := range api.PodRequests(spec) {
		if scoring.Tracked(name) {
			pod.Requests[name] = v
		}
	}
	pod.Containers = make([]scoring.Resources, len(spec.Containers))
	for i := range spec.Containers {
		keys := scoring.Resources{}
		r := &spec.Containers[i].Resources
		for _, l := range []corev1.ResourceList{r.Limits, r.Requests} {
			for name, q := range l {
				keys[name] = api.ResourceValue(name, q)
			}
		}
		pod.Containers[i] = keys
	}
	return pod
}
