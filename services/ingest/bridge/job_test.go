package bridge

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// TestStartRestore: start changes only what an admission owns, and
// restore undoes exactly that, whatever the template held before.
func TestStartRestore(t *testing.T) {
	gpuToleration := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	flavors := map[string]api.ResourceFlavorSpec{
		"spot": spotFlavor,
		"gpu":  {NodeLabels: map[string]string{"accel": "a100"}, Tolerations: []corev1.Toleration{gpuToleration}},
		"bare": {},
	}
	adm := func(count int32, byResource map[corev1.ResourceName]string) *scheduler.Admission {
		return &scheduler.Admission{ClusterQueue: "cq", PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: count, Flavors: byResource}}}
	}
	tests := []struct {
		name        string
		job         *batchv1.Job
		admission   *scheduler.Admission
		want        jobState
		tolerations []corev1.Toleration // extra tolerations the user had
	}{{
		name:      "no nodeSelector of its own",
		job:       newJob("ns", "j", "u", 2, nil),
		admission: adm(2, map[corev1.ResourceName]string{corev1.ResourceCPU: "spot"}),
		want: jobState{NodeSelector: map[string]string{"instance": "spot"}, Tolerations: []corev1.Toleration{spotToleration},
			Parallelism: 2, Admitted: true, Original: true},
	}, {
		name:        "two flavors for two resources; the user's toleration kept, not repeated",
		job:         newJob("ns", "j", "u", 1, map[string]string{"disk": "ssd"}),
		admission:   adm(1, map[corev1.ResourceName]string{corev1.ResourceCPU: "spot", "nvidia.com/gpu": "gpu"}),
		tolerations: []corev1.Toleration{spotToleration},
		want: jobState{NodeSelector: map[string]string{"disk": "ssd", "instance": "spot", "accel": "a100"},
			Tolerations: []corev1.Toleration{spotToleration, gpuToleration}, Parallelism: 1, Admitted: true, Original: true},
	}, {
		name:      "partial admission lowers parallelism",
		job:       newJob("ns", "j", "u", 4, nil),
		admission: adm(3, map[corev1.ResourceName]string{corev1.ResourceCPU: "bare"}),
		want:      jobState{Parallelism: 3, Admitted: true, Original: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := tc.job
			job.Spec.Suspend = new(true)
			job.Spec.Template.Spec.Tolerations = tc.tolerations
			before := job.DeepCopy()
			if err := start(job, tc.admission, 7, flavors); err != nil {
				t.Fatal(err)
			}
			if err := same("started", tc.want, stateOf(job)); err != nil {
				t.Error(err)
			}
			if seq, ok := runningSeq(job); !ok || seq != 7 {
				t.Errorf("runningSeq = %d, %v; want 7, true", seq, ok)
			}
			job.Spec.Suspend = new(true)
			if err := restore(job); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, job); d != "" {
				t.Errorf("restored (-before,+after):\n%s", d)
			}
		})
	}
}

// TestSubmission: the Job is submitted as the user wrote it, whatever an
// admission changed, and without the bridge's annotations.
func TestSubmission(t *testing.T) {
	job := newJob("ns", "j", "u", 4, map[string]string{"disk": "ssd"})
	job.Annotations = map[string]string{api.JobMinParallelismAnnot: "2"}
	job.Spec.Suspend = new(true)
	wantSpec := job.Spec.DeepCopy()
	if err := start(job, &scheduler.Admission{PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 2,
		Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "spot"}}}}, 1, map[string]api.ResourceFlavorSpec{"spot": spotFlavor}); err != nil {
		t.Fatal(err)
	}
	raw, err := submission(job)
	if err != nil {
		t.Fatal(err)
	}
	var got batchv1.Job
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	wantSpec.Suspend = new(true)
	if d := cmp.Diff(*wantSpec, got.Spec); d != "" {
		t.Errorf("spec (-want,+got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{api.JobMinParallelismAnnot: "2"}, got.Annotations); d != "" {
		t.Errorf("annotations (-want,+got):\n%s", d)
	}
	if got.APIVersion != "batch/v1" || got.Kind != "Job" || got.UID != "u" {
		t.Errorf("submitted %s %s uid %q", got.APIVersion, got.Kind, got.UID)
	}
	// And ingest accepts it as a Job.
	objs, err := api.Decode(raw)
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode: %v", err)
	}
	if _, err := api.JobToWorkload(objs[0].(*api.Job), nil); err != nil {
		t.Fatal(err)
	}
}

// TestPodsReady is KEP-349's count: ready + succeeded reach parallelism.
func TestPodsReady(t *testing.T) {
	i := func(n int32) *int32 { return &n }
	tests := []struct {
		parallelism, ready *int32
		succeeded          int32
		want               bool
	}{
		{nil, nil, 0, false},
		{nil, i(1), 0, true},
		{i(3), i(2), 0, false},
		{i(3), i(2), 1, true},
		{i(3), nil, 3, true},
	}
	for _, tc := range tests {
		j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism}, Status: batchv1.JobStatus{Ready: tc.ready, Succeeded: tc.succeeded}}
		if got := podsReady(j); got != tc.want {
			t.Errorf("parallelism %v ready %v succeeded %d: podsReady = %v, want %v", tc.parallelism, tc.ready, tc.succeeded, got, tc.want)
		}
	}
}
