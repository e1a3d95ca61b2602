package quota

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestAddIntReportsOverflow(t *testing.T) {
	cases := []struct {
		a, b int64
		ok   bool
	}{
		{math.MaxInt64 - 1, 1, true},
		{math.MaxInt64, 1, false},
		{math.MaxInt64, 0, true},
		{math.MinInt64 + 1, -1, true},
		{math.MinInt64, -1, false},
		{math.MaxInt64, math.MinInt64, true},
		{math.MaxInt64, math.MaxInt64, false},
		{-5, 3, true},
	}
	for _, tc := range cases {
		s, ok := AddInt(tc.a, tc.b)
		if ok != tc.ok || (ok && s != tc.a+tc.b) {
			t.Errorf("AddInt(%d, %d) = %d, %v; want ok=%v", tc.a, tc.b, s, ok, tc.ok)
		}
	}
}

func TestMulIntReportsOverflow(t *testing.T) {
	cases := []struct {
		a, b int64
		ok   bool
	}{
		{math.MaxInt64 / 2, 2, true},
		{math.MaxInt64/2 + 1, 2, false},
		{3_074_457_345_618_258_602, 3, true}, // just under MaxInt64
		{3_074_457_345_618_258_603, 3, false},
		{math.MinInt64, -1, false},
		{-1, math.MinInt64, false},
		{math.MinInt64, 1, true},
		{0, math.MaxInt64, true},
		{1e16, 1000, false}, // cpu 1e13 cores in milli × 1000 pods
		{1e15, 1000, true},
	}
	for _, tc := range cases {
		p, ok := MulInt(tc.a, tc.b)
		if ok != tc.ok || (ok && p != tc.a*tc.b) {
			t.Errorf("MulInt(%d, %d) = %d, %v; want ok=%v", tc.a, tc.b, p, ok, tc.ok)
		}
	}
}

// TestValueExactAtTheLimit: the largest amount that converts exactly, and
// one unit more, for both units; Value saturates instead of wrapping.
func TestValueExactAtTheLimit(t *testing.T) {
	cases := []struct {
		res  corev1.ResourceName
		q    string
		want int64
		ok   bool
	}{
		{corev1.ResourceCPU, "9223372036854775807m", math.MaxInt64, true},
		{corev1.ResourceCPU, "9223372036854775808m", math.MaxInt64, false},
		{corev1.ResourceCPU, "9223372036854775", 9223372036854775000, true},
		{corev1.ResourceCPU, "9223372036854776", math.MaxInt64, false},
		{corev1.ResourceCPU, "1e30", math.MaxInt64, false},
		{corev1.ResourceMemory, "9223372036854775807", math.MaxInt64, true},
		{corev1.ResourceMemory, "9223372036854775808", math.MaxInt64, false},
		// ParseQuantity itself clamps binary-suffixed amounts at MaxInt64.
		{corev1.ResourceMemory, "8Ei", math.MaxInt64, true},
		{corev1.ResourceMemory, "7Ei", 7 << 60, true},
		// Decided from their size alone: exact arithmetic on these costs
		// seconds (10^10000000 has ten million digits).
		{corev1.ResourceCPU, "1e10000000", math.MaxInt64, false},
		{corev1.ResourceMemory, "1e10000000", math.MaxInt64, false},
		{corev1.ResourceCPU, "1e-40", 1, true},
		{corev1.ResourceMemory, "0.001", 1, true},
	}
	for _, tc := range cases {
		q := resource.MustParse(tc.q)
		v, ok := ValueExact(tc.res, q)
		if ok != tc.ok || (ok && v != tc.want) {
			t.Errorf("ValueExact(%s, %s) = %d, %v; want %d, %v", tc.res, tc.q, v, ok, tc.want, tc.ok)
		}
		if got := Value(tc.res, q); got != tc.want {
			t.Errorf("Value(%s, %s) = %d, want %d (saturated when inexact)", tc.res, tc.q, got, tc.want)
		}
	}
}

func TestUsageAddSaturates(t *testing.T) {
	cell := FlavorResource{Flavor: "f", Resource: corev1.ResourceCPU}
	u := Usage{cell: math.MaxInt64 - 1}
	if !u.Add(Usage{cell: 1}) || u[cell] != math.MaxInt64 {
		t.Fatalf("just under the limit: %d", u[cell])
	}
	if u.Add(Usage{cell: 1}) || u[cell] != math.MaxInt64 {
		t.Fatalf("over the limit must saturate and report: %d", u[cell])
	}
	if !u.Sub(Usage{cell: math.MaxInt64}) || len(u) != 0 {
		t.Fatalf("sub to zero drops the cell: %v", u)
	}
	if u.Sub(Usage{cell: math.MinInt64}) || u[cell] != math.MaxInt64 {
		t.Fatalf("sub of MinInt64 must saturate and report: %v", u)
	}
}

// TestValueExactFastAgrees: the int64 shortcut of ValueExact answers what
// the general conversion answers, around every bound it tests.
func TestValueExactFastAgrees(t *testing.T) {
	amounts := []string{"0", "-0", "1", "-1", "4", "16Gi", "7Ei", "8Ei", "-8Ei", "1Pi", "1k", "1M", "1E", "9E", "10E",
		"9223372036854775807", "-9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"9223372036854775", "9223372036854776", "-9223372036854775", "-9223372036854776",
		"9223372036854775k", "9223372036854k", "9223372036855k", "-9223372036855k", "9223372036854M", "9223372036855M",
		"9223372036854775807m", "500m", "1.5", "0.001", "1e3", "1e18", "1e19", "-1e18", "1e-40", "1e30"}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		v := rng.Int64() >> rng.IntN(64)
		if rng.IntN(2) == 0 {
			v = -v
		}
		amounts = append(amounts, strconv.FormatInt(v, 10)+[]string{"", "k", "M", "G", "T", "Ki", "Mi", "m", "u"}[rng.IntN(9)])
	}
	for _, s := range amounts {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			continue // out of ParseQuantity's range
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "example.com/gpu"} {
			v, ok := ValueExact(name, q)
			wv, wok := valueExact(name, q)
			if ok != wok || (ok && v != wv) {
				t.Errorf("ValueExact(%s, %s) = %d, %v; the general conversion: %d, %v", name, s, v, ok, wv, wok)
			}
		}
	}
}
