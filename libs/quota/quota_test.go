package quota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestValueUsesKueueUnits(t *testing.T) {
	cases := []struct {
		res  corev1.ResourceName
		q    string
		want int64
	}{
		{corev1.ResourceCPU, "1", 1000},
		{corev1.ResourceCPU, "250m", 250},
		{corev1.ResourceCPU, "0.5", 500},
		{corev1.ResourceMemory, "1Gi", 1 << 30},
		{corev1.ResourceMemory, "1.5", 2},
		{"nvidia.com/gpu", "0.5", 1},
		{"nvidia.com/gpu", "8", 8},
	}
	for _, tc := range cases {
		if got := Value(tc.res, resource.MustParse(tc.q)); got != tc.want {
			t.Errorf("Value(%s, %s) = %d, want %d", tc.res, tc.q, got, tc.want)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	cases := []struct {
		res  corev1.ResourceName
		v    int64
		want string
	}{
		{corev1.ResourceCPU, 1500, "1500m"},
		{corev1.ResourceCPU, 2000, "2"},
		{corev1.ResourceMemory, 1 << 30, "1Gi"},
		{"nvidia.com/gpu", 3, "3"},
	}
	for _, tc := range cases {
		if got := Format(tc.res, tc.v); got != tc.want {
			t.Errorf("Format(%s, %d) = %q, want %q", tc.res, tc.v, got, tc.want)
		}
	}
}

func TestLendableAndGuaranteed(t *testing.T) {
	two := int64(2)
	cases := []struct {
		name                 string
		l                    Limits
		lendable, guaranteed int64
	}{
		{"no lending limit lends all", Limits{Nominal: 5}, 5, 0},
		{"lending limit keeps the rest", Limits{Nominal: 5, LendingLimit: &two}, 2, 3},
	}
	for _, tc := range cases {
		if tc.l.Lendable() != tc.lendable || tc.l.Guaranteed() != tc.guaranteed {
			t.Errorf("%s: lendable %d guaranteed %d, want %d %d", tc.name, tc.l.Lendable(), tc.l.Guaranteed(), tc.lendable, tc.guaranteed)
		}
	}
}

func TestSubDropsEmptiedCells(t *testing.T) {
	a := FlavorResource{"f", "cpu"}
	b := FlavorResource{"f", "memory"}
	u := Usage{a: 3, b: 4}
	u.Sub(Usage{a: 3, b: 1})
	if d := cmp.Diff(Usage{b: 3}, u); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
