// Package quota holds the exact integer arithmetic of Kueue quotas: usage per
// flavor and resource, a ClusterQueue's limits, and the cohort formulas of
// KEP-1224 (lendingLimit). Values are in Kueue's units: cpu in milli-units,
// every other resource in whole units (Quantity.Value, rounded up).
package quota

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FlavorResource names one quota cell.
type FlavorResource struct {
	Flavor   string
	Resource corev1.ResourceName
}

// Compare orders cells by flavor, then resource, for stable output.
func (a FlavorResource) Compare(b FlavorResource) int {
	if c := cmp.Compare(a.Flavor, b.Flavor); c != 0 {
		return c
	}
	return cmp.Compare(a.Resource, b.Resource)
}

// Usage is an amount per cell. A missing cell is zero.
type Usage map[FlavorResource]int64

// Add adds o into u. A cell whose sum does not fit int64 saturates, so it
// reads as full rather than wrapping to a small or negative amount; ok is
// false when that happened.
func (u Usage) Add(o Usage) (ok bool) {
	ok = true
	for k, v := range o {
		s, fits := AddInt(u[k], v)
		if !fits {
			s, ok = SatAdd(u[k], v), false
		}
		u[k] = s
	}
	return ok
}

// Sub subtracts o from u, dropping cells that reach zero so that equal
// usages compare equal. It saturates like Add; ok is false when a cell did.
func (u Usage) Sub(o Usage) (ok bool) {
	ok = true
	for k, v := range o {
		n, fits := AddInt(u[k], -v)
		if !fits || v == math.MinInt64 {
			n, ok = SatAdd(u[k], -max(v, -math.MaxInt64)), false
		}
		if n != 0 {
			u[k] = n
		} else {
			delete(u, k)
		}
	}
	return ok
}

// Clone returns an independent copy.
func (u Usage) Clone() Usage {
	c := make(Usage, len(u))
	for k, v := range u {
		c[k] = v
	}
	return c
}

// Keys returns the cells in stable order.
func (u Usage) Keys() []FlavorResource {
	keys := make([]FlavorResource, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, FlavorResource.Compare)
	return keys
}

// Limits is one flavor/resource entry of a ClusterQueue.
type Limits struct {
	Nominal        int64
	BorrowingLimit *int64
	LendingLimit   *int64
}

// Lendable is what the queue contributes to its cohort's pool.
func (l Limits) Lendable() int64 {
	if l.LendingLimit != nil {
		return *l.LendingLimit
	}
	return l.Nominal
}

// Guaranteed is the part of the nominal quota the queue never lends.
func (l Limits) Guaranteed() int64 {
	if l.LendingLimit != nil {
		return l.Nominal - *l.LendingLimit
	}
	return 0
}

// Value converts a quantity to Kueue's integer units for the resource. An
// amount beyond the int64 range saturates (see ValueExact), so it exceeds
// every quota instead of wrapping or reading as 0.
func Value(name corev1.ResourceName, q resource.Quantity) int64 {
	if v, ok := ValueExact(name, q); ok {
		return v
	}
	if q.Sign() > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// Format renders an amount back as a Kubernetes quantity string.
func Format(name corev1.ResourceName, v int64) string {
	switch {
	case name == corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	default:
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
}
