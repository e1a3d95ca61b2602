package quota

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quota arithmetic never wraps. Two rules, one per side of a comparison:
//
//   - a sum of usages or requests that does not fit int64 is reported
//     (AddInt, MulInt return ok=false; the callers treat it as "exceeds every
//     quota", since no quota is larger than math.MaxInt64);
//   - a sum of quotas (nominal + borrowingLimit, a cohort's lendable pool)
//     saturates at math.MaxInt64 (SatAdd): every representable usage is
//     below the true sum anyway, so saturating it changes no decision.
//
// The door (libs/api Validate) refuses any workload or quota whose values
// do not fit exactly, so these paths only matter for content that reached
// the log some other way; there, overflow is "does not fit", never a
// silently smaller number.

// AddInt returns a+b and whether it fits int64.
func AddInt(a, b int64) (int64, bool) {
	s := a + b
	// Overflow happened iff both operands share a sign the sum lacks.
	return s, !(a > 0 && b > 0 && s < 0) && !(a < 0 && b < 0 && s >= 0)
}

// MulInt returns a*b and whether it fits int64.
func MulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	// MinInt64 * -1 wraps to MinInt64, which the division test cannot see.
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return p, false
	}
	return p, true
}

// SatAdd is a+b clamped to the int64 range.
func SatAdd(a, b int64) int64 {
	if s, ok := AddInt(a, b); ok {
		return s
	}
	if a > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// ValueExact converts a quantity to Kueue's integer units for the resource
// (as Value) and reports whether the result is exact in int64: false when
// the amount is beyond ±math.MaxInt64 units, where Quantity.MilliValue and
// Value wrap or return 0.
func ValueExact(name corev1.ResourceName, q resource.Quantity) (int64, bool) {
	// An integer amount held as an int64 (most are: "4", "16Gi") converts
	// without leaving that form: the general path below allocates.
	if v, ok := q.AsInt64(); ok && v != math.MinInt64 {
		if name != corev1.ResourceCPU {
			return v, true
		}
		if v <= math.MaxInt64/1000 && v >= -(math.MaxInt64/1000) {
			return v * 1000, true
		}
	}
	return valueExact(name, q)
}

// valueExact is ValueExact for any quantity.
func valueExact(name corev1.ResourceName, q resource.Quantity) (int64, bool) {
	// Amounts far from the int64 range are decided from their size alone:
	// comparing or converting 1e10000000 exactly would cost seconds.
	shift := 0
	if name == corev1.ResourceCPU {
		shift = 3
	}
	switch small, large := magnitude(q, shift); {
	case q.Sign() == 0:
		return 0, true
	case large:
		return 0, false
	case small && q.Sign() > 0:
		return 1, true // Kueue rounds a fraction of a unit up
	case small:
		return 0, true
	}
	lo, hi := minPlain, maxPlain
	if name == corev1.ResourceCPU {
		lo, hi = minMilli, maxMilli
	}
	if q.Cmp(hi) > 0 || q.Cmp(lo) < 0 {
		return 0, false
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue(), true
	}
	return q.Value(), true
}

// magnitude tells, from the number of bits of q's mantissa and its decimal
// scale only, whether |q| × 10^shift is surely below 0.1 (small) or surely
// at least 10^19, beyond int64 (large).
func magnitude(q resource.Quantity, shift int) (small, large bool) {
	d := q.AsDec() // q is a copy: AsDec's change of representation stays here
	bits := d.UnscaledBig().BitLen()
	// 10^exp <= |q| < 10^(exp+1) for some exp in [lowest, highest].
	lowest := int64(float64(bits-1)*math.Log10(2)) - 1 - int64(d.Scale()) + int64(shift)
	highest := int64(float64(bits)*math.Log10(2)) + 1 - int64(d.Scale()) + int64(shift)
	return highest < -1, lowest >= 19
}

// The extreme amounts that convert exactly, per unit.
var (
	maxMilli = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	minMilli = *resource.NewMilliQuantity(math.MinInt64+1, resource.DecimalSI)
	maxPlain = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	minPlain = *resource.NewQuantity(math.MinInt64+1, resource.DecimalSI)
)
