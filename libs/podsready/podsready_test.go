package podsready

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBackoffGrowsAndCaps(t *testing.T) {
	c := Config{BackoffBase: 60 * time.Second, BackoffMax: 3600 * time.Second}
	want := []time.Duration{60 * time.Second, 120 * time.Second, 240 * time.Second, 480 * time.Second,
		960 * time.Second, 1920 * time.Second, 3600 * time.Second, 3600 * time.Second}
	for i, w := range want {
		if got := c.Backoff(int32(i + 1)); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := c.Backoff(1000); got != time.Hour {
		t.Errorf("Backoff(1000) = %v, want the cap without overflow", got)
	}
}

func TestOnTimeout(t *testing.T) {
	two := int32(2)
	zero := int32(0)
	c := Config{BackoffBase: 10 * time.Second, BackoffMax: time.Minute}
	cases := []struct {
		name  string
		limit *int32
		count int32
		want  Timeout
	}{
		{"first timeout requeues after the base", nil, 0, Timeout{Count: 1, RequeueAt: t0.Add(10 * time.Second)}},
		{"third timeout doubles twice", nil, 2, Timeout{Count: 3, RequeueAt: t0.Add(40 * time.Second)}},
		{"unlimited keeps requeueing at the cap", nil, 50, Timeout{Count: 51, RequeueAt: t0.Add(time.Minute)}},
		{"last allowed requeue", &two, 1, Timeout{Count: 2, RequeueAt: t0.Add(20 * time.Second)}},
		{"limit spent deactivates", &two, 2, Timeout{Deactivate: true}},
		{"limit zero deactivates on the first timeout", &zero, 0, Timeout{Deactivate: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := c
			c.BackoffLimit = tc.limit
			if d := cmp.Diff(tc.want, c.OnTimeout(tc.count, t0)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestFromAPIAppliesKueueDefaults(t *testing.T) {
	off := false
	creation := api.RequeueByCreation
	cases := []struct {
		name string
		in   *api.Configuration
		want Config
	}{
		{"no configuration is disabled", nil, Config{}},
		{"enable alone: 5m, blocking, by eviction, 60s..3600s", &api.Configuration{WaitForPodsReady: &api.WaitForPodsReady{Enable: true}},
			Config{Enable: true, Timeout: 5 * time.Minute, BlockAdmission: true, ByEviction: true, BackoffBase: time.Minute, BackoffMax: time.Hour}},
		{"explicit values", &api.Configuration{WaitForPodsReady: &api.WaitForPodsReady{Enable: true, BlockAdmission: &off,
			Timeout: &metav1.Duration{Duration: time.Minute}, RequeuingStrategy: &api.RequeuingStrategy{Timestamp: &creation}}},
			Config{Enable: true, Timeout: time.Minute, BlockAdmission: false, ByEviction: false, BackoffBase: time.Minute, BackoffMax: time.Hour}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, FromAPI(tc.in)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestDeadlineIsAdmissionPlusTimeout(t *testing.T) {
	c := Config{Timeout: 5 * time.Minute}
	if got := c.Deadline(t0); !got.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("Deadline = %v", got)
	}
}
