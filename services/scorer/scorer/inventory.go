package scorer

import (
	"slices"
	"strings"
	"sync"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

// Inventory is the scorer's view of the cluster's nodes, fed by one source
// (Kubernetes informers or the JQ_NODES bucket) and read by placement and
// queries. It is safe for concurrent use. A stored Node's maps are never
// modified once stored, so a snapshot can share them.
type Inventory struct {
	mu      sync.Mutex
	nodes   map[string]scoring.Node // by source key
	synced  bool
	changed chan struct{}
}

// NewInventory returns an empty, unsynced inventory.
func NewInventory() *Inventory {
	return &Inventory{nodes: map[string]scoring.Node{}, changed: make(chan struct{})}
}

// Nodes returns a snapshot of the nodes, sorted by name.
func (inv *Inventory) Nodes() []scoring.Node {
	inv.mu.Lock()
	out := make([]scoring.Node, 0, len(inv.nodes))
	for _, n := range inv.nodes {
		out = append(out, n)
	}
	inv.mu.Unlock()
	slices.SortFunc(out, func(a, b scoring.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Synced reports whether the source has delivered its initial state.
func (inv *Inventory) Synced() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.synced
}

// Changed returns a channel that is closed at the next change, so that a
// caller can wait for the inventory to move without polling.
func (inv *Inventory) Changed() <-chan struct{} {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.changed
}

func (inv *Inventory) put(key string, n scoring.Node) {
	inv.update(func() { inv.nodes[key] = n })
}

func (inv *Inventory) remove(key string) {
	inv.update(func() { delete(inv.nodes, key) })
}

func (inv *Inventory) markSynced() {
	inv.update(func() { inv.synced = true })
}

func (inv *Inventory) update(f func()) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	f()
	close(inv.changed)
	inv.changed = make(chan struct{})
}
