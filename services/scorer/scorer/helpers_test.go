package scorer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

// list builds a ResourceList from name/quantity pairs.
func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// res builds scoring Resources through the same conversion as the code.
func res(kv ...string) scoring.Resources { return scoring.NewResources(list(kv...)) }

// plus adds amounts.
func plus(rs ...scoring.Resources) scoring.Resources {
	out := scoring.Resources{}
	for _, r := range rs {
		for n, v := range r {
			out[n] += v
		}
	}
	return out
}

// nodeOpts compare nodes with empty and nil maps alike.
var nodeOpts = cmp.Options{cmpopts.EquateEmpty()}

// waitNodes waits, without sleeping, until the inventory holds want: it
// re-checks at every change and fails with the last difference after a
// deadline.
func waitNodes(t *testing.T, inv *Inventory, want []scoring.Node) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := inv.Changed()
		diff := cmp.Diff(want, inv.Nodes(), nodeOpts)
		if diff == "" {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("inventory (-want +got):\n%s", diff)
		}
	}
}

// waitSynced waits until the inventory's source has delivered its initial
// state.
func waitSynced(t *testing.T, inv *Inventory) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := inv.Changed()
		if inv.Synced() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("inventory never synced")
		}
	}
}
