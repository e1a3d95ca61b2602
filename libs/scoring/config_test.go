package scoring

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{name: "documented profile is valid", cfg: gpuConfig(2, 2)},
		{name: "empty config is valid", cfg: Config{}},
		{name: "weight 0 and bare names are accepted", cfg: Config{FitPlus: fit("gpu", MostAllocated, 0)}},
		{
			name: "unknown strategy names the field",
			cfg:  Config{FitPlus: fit("cpu", Strategy("Foo"), 1)},
			want: []string{`config.fitPlus[cpu].type: unknown strategy "Foo" (want MostAllocated or LeastAllocated)`},
		},
		{
			name: "missing strategy is unknown",
			cfg:  Config{FitPlus: fit("memory", Strategy(""), 1)},
			want: []string{`config.fitPlus[memory].type: unknown strategy "" (want MostAllocated or LeastAllocated)`},
		},
		{
			name: "negative resource weight",
			cfg:  Config{FitPlus: fit("nvidia.com/gpu", MostAllocated, -1)},
			want: []string{`config.fitPlus[nvidia.com/gpu].weight: must not be negative, got -1`},
		},
		{
			name: "weight above MaxWeight",
			cfg:  Config{FitPlus: map[corev1.ResourceName]ResourcesType{"cpu": {Type: MostAllocated, Weight: MaxWeight + 1}}},
			want: []string{`config.fitPlus[cpu].weight: must be at most 2147483647, got 2147483648`},
		},
		{
			name: "negative plugin weight and unknown plugin, in field order",
			cfg:  Config{PluginWeights: map[string]int64{PluginScarce: -2, "ImageLocality": 1}},
			want: []string{
				`config.pluginWeights[ImageLocality]: unknown plugin (want NodeResourcesFitPlus or ScarceResourceAvoidance)`,
				`config.pluginWeights[ScarceResourceAvoidance]: must not be negative, got -2`,
			},
		},
		{
			name: "every problem is reported, resources by name",
			cfg:  Config{FitPlus: fit("memory", Strategy("most"), -1, "cpu", LeastAllocated, -3)},
			want: []string{
				`config.fitPlus[cpu].weight: must not be negative, got -3`,
				`config.fitPlus[memory].type: unknown strategy "most" (want MostAllocated or LeastAllocated)`,
				`config.fitPlus[memory].weight: must not be negative, got -1`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var got []string
			if err != nil {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("error %v does not match ErrInvalidConfig", err)
				}
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					got = append(got, e.Error())
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if _, nerr := New(tc.cfg); (nerr != nil) != (err != nil) {
				t.Errorf("New error %v, Validate error %v", nerr, err)
			}
		})
	}
}

func TestNewConfigFromKoordinatorArgs(t *testing.T) {
	var fitArgs ResourceTypesArgs
	var scarceArgs ScarceResourceAvoidanceArgs
	if err := json.Unmarshal([]byte(`{"resources":{"nvidia.com/gpu":{"type":"MostAllocated","weight":2},
		"cpu":{"type":"LeastAllocated","weight":1},"memory":{"type":"LeastAllocated","weight":1}}}`), &fitArgs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"resources":["nvidia.com/gpu"]}`), &scarceArgs); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(gpuConfig(2, 2), NewConfig(fitArgs, scarceArgs, 2, 2)); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestConfigDecodesScorerShape(t *testing.T) {
	var got Config
	if err := json.Unmarshal([]byte(`{"fitPlus":{"nvidia.com/gpu":{"type":"MostAllocated","weight":2},
		"cpu":{"type":"LeastAllocated","weight":1},"memory":{"type":"LeastAllocated","weight":1}},
		"scarce":["nvidia.com/gpu"],"pluginWeights":{"NodeResourcesFitPlus":1,"ScarceResourceAvoidance":1}}`), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(gpuConfig(1, 1), got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
