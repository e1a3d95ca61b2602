package scorer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/scoring"
)

// proposal is the SchedulerConfiguration of Koordinator's proposal.
const proposal = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: NodeResourcesFitPlus
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: ResourceTypesArgs
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
        cpu:
          type: LeastAllocated
          weight: 1
        memory:
          type: LeastAllocated
          weight: 1
  - name: ScarceResourceAvoidance
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: ScarceResourceAvoidanceArgs
      resources:
      - nvidia.com/gpu
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
  plugins:
    score:
      enabled:
      - name: NodeResourcesFitPlus
        weight: 2
      - name: ScarceResourceAvoidance
        weight: 2
      disabled:
      - name: "*"
`

var proposalConfig = scoring.Config{
	FitPlus: map[corev1.ResourceName]scoring.ResourcesType{
		"nvidia.com/gpu": {Type: scoring.MostAllocated, Weight: 2},
		"cpu":            {Type: scoring.LeastAllocated, Weight: 1},
		"memory":         {Type: scoring.LeastAllocated, Weight: 1},
	},
	Scarce:        []corev1.ResourceName{"nvidia.com/gpu"},
	PluginWeights: map[string]int64{scoring.PluginFitPlus: 2, scoring.PluginScarce: 2},
}

func TestScoringOptions(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		opts ScoringOptions
		want scoring.Config
		err  string
	}{{
		name: "the proposal's KubeSchedulerConfiguration",
		opts: ScoringOptions{File: file("proposal.yaml", proposal)},
		want: proposalConfig,
	}, {
		name: "weight flags override the file's",
		opts: ScoringOptions{File: file("proposal.yaml", proposal), ScarceWeight: 5},
		want: scoring.Config{FitPlus: proposalConfig.FitPlus, Scarce: proposalConfig.Scarce,
			PluginWeights: map[string]int64{scoring.PluginFitPlus: 2, scoring.PluginScarce: 5}},
	}, {
		name: "bare args documents, weights from flags",
		opts: ScoringOptions{File: file("args.yaml", `kind: ResourceTypesArgs
resources:
  cpu: {type: MostAllocated, weight: 3}
---
kind: ScarceResourceAvoidanceArgs
resources: [nvidia.com/gpu, rdma/hca]
`), FitPlusWeight: 4},
		want: scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{"cpu": {Type: scoring.MostAllocated, Weight: 3}},
			Scarce: []corev1.ResourceName{"nvidia.com/gpu", "rdma/hca"}, PluginWeights: map[string]int64{scoring.PluginFitPlus: 4}},
	}, {
		name: "JSON and the Go type's kind",
		opts: ScoringOptions{File: file("args.json", `{"kind":"NodeResourcesFitPlusArgs","resources":{"memory":{"type":"LeastAllocated","weight":1}}}`)},
		want: scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{"memory": {Type: scoring.LeastAllocated, Weight: 1}},
			PluginWeights: map[string]int64{}},
	}, {
		name: "a plugin the profile does not enable has no effect",
		opts: ScoringOptions{File: file("fit-only.yaml", `kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFitPlus
    args: {resources: {cpu: {type: MostAllocated, weight: 2}}}
  - name: ScarceResourceAvoidance
    args: {resources: [nvidia.com/gpu]}
  plugins: {score: {enabled: [{name: NodeResourcesFitPlus}]}}
`)},
		want: scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{"cpu": {Type: scoring.MostAllocated, Weight: 2}},
			PluginWeights: map[string]int64{}},
	}, {
		name: "--scheduler-name picks the profile",
		opts: ScoringOptions{SchedulerName: "b", File: file("two.yaml", `kind: KubeSchedulerConfiguration
profiles:
- schedulerName: a
  pluginConfig: [{name: NodeResourcesFitPlus, args: {resources: {cpu: {type: MostAllocated, weight: 1}}}}]
- schedulerName: b
  pluginConfig: [{name: NodeResourcesFitPlus, args: {resources: {cpu: {type: LeastAllocated, weight: 1}}}}]
`)},
		want: scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{"cpu": {Type: scoring.LeastAllocated, Weight: 1}},
			PluginWeights: map[string]int64{}},
	}, {
		name: "flags by default",
		opts: ScoringOptions{},
		want: scoring.Config{FitPlus: proposalConfig.FitPlus, Scarce: proposalConfig.Scarce, PluginWeights: map[string]int64{}},
	}, {
		name: "flags",
		opts: ScoringOptions{FitPlus: "cpu=MostAllocated, memory=LeastAllocated:3", Scarce: "none", FitPlusWeight: 2},
		want: scoring.Config{FitPlus: map[corev1.ResourceName]scoring.ResourcesType{
			"cpu": {Type: scoring.MostAllocated, Weight: 1}, "memory": {Type: scoring.LeastAllocated, Weight: 3}},
			PluginWeights: map[string]int64{scoring.PluginFitPlus: 2}},
	}, {
		name: "unknown strategy and negative weight in a file",
		opts: ScoringOptions{File: file("bad.yaml", `kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFitPlus
    args: {resources: {cpu: {type: Most, weight: -1}}}
  plugins: {score: {enabled: [{name: NodeResourcesFitPlus, weight: -2}]}}
`)},
		err: filepath.Join(dir, "bad.yaml") + ": profiles[0].plugins.score.enabled[0].weight: must be between 0 and 2147483647, got -2\n" +
			"profiles[0].pluginConfig[0].args.resources[cpu].type: unknown strategy \"Most\" (want MostAllocated or LeastAllocated)\n" +
			"profiles[0].pluginConfig[0].args.resources[cpu].weight: must be between 0 and 2147483647, got -1",
	}, {
		name: "unknown fields in args",
		opts: ScoringOptions{File: file("unknown.yaml", "kind: ScarceResourceAvoidanceArgs\nresource: [nvidia.com/gpu]\n")},
		err:  filepath.Join(dir, "unknown.yaml") + ": documents[0].resource: unknown field",
	}, {
		name: "weight not an integer",
		opts: ScoringOptions{File: file("float.yaml", "kind: ResourceTypesArgs\nresources: {cpu: {type: MostAllocated, weight: 1.5}}\n")},
		err:  filepath.Join(dir, "float.yaml") + ": documents[0].resources[cpu].weight: want an integer, got 1.5",
	}, {
		name: "unknown kind",
		opts: ScoringOptions{File: file("kind.yaml", "kind: ConfigMap\n")},
		err:  filepath.Join(dir, "kind.yaml") + `: documents[0].kind: "ConfigMap", want KubeSchedulerConfiguration, ResourceTypesArgs or ScarceResourceAvoidanceArgs`,
	}, {
		name: "two profiles need --scheduler-name",
		opts: ScoringOptions{File: file("unnamed.yaml", `kind: KubeSchedulerConfiguration
profiles:
- pluginConfig: [{name: NodeResourcesFitPlus, args: {}}]
- pluginConfig: [{name: ScarceResourceAvoidance, args: {}}]
`)},
		err: filepath.Join(dir, "unnamed.yaml") + ": profiles: 2 profiles configure the scorer's plugins; choose one with --scheduler-name",
	}, {
		name: "no profile of that name",
		opts: ScoringOptions{File: file("proposal.yaml", proposal), SchedulerName: "default-scheduler"},
		err:  filepath.Join(dir, "proposal.yaml") + `: profiles: no profile with schedulerName "default-scheduler"`,
	}, {
		name: "missing file",
		opts: ScoringOptions{File: filepath.Join(dir, "nope.yaml")},
		err:  "--config: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory",
	}, {
		name: "--config excludes the resource flags",
		opts: ScoringOptions{File: file("proposal.yaml", proposal), FitPlus: "cpu=MostAllocated"},
		err:  "--config excludes --fit-plus and --scarce-resources",
	}, {
		name: "bad flags",
		opts: ScoringOptions{FitPlus: "cpu=Most:x,memory,gpu=LeastAllocated:-1"},
		err: "--fit-plus: cpu: unknown strategy \"Most\" (want MostAllocated or LeastAllocated)\n" +
			"--fit-plus: cpu: weight \"x\" is not an integer\n" +
			"--fit-plus: \"memory\": want name=Strategy[:weight]\n" +
			"--fit-plus: gpu: weight must be between 0 and 2147483647, got -1",
	}, {
		name: "negative plugin weight flag",
		opts: ScoringOptions{ScarceWeight: -1},
		err:  "--scarce-weight: must be between 0 and 2147483647, got -1",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opts.Load()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if d := cmp.Diff(tc.err, gotErr); d != "" {
				t.Fatalf("error (-want +got):\n%s", d)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(tc.want, got, nodeOpts); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		})
	}
}
