package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeClasses is an in-memory PriorityClasses; the global default is the
// lowest-valued globalDefault class, as the interface requires.
type fakeClasses struct {
	wpc      map[string]int32
	pc       map[string]int32
	defaults map[string]int32
}

func (f fakeClasses) WorkloadPriorityClass(name string) (int32, bool, error) {
	v, ok := f.wpc[name]
	return v, ok, nil
}

func (f fakeClasses) PriorityClass(name string) (int32, bool, error) {
	if v, ok := f.defaults[name]; ok {
		return v, true, nil
	}
	v, ok := f.pc[name]
	return v, ok, nil
}

func (f fakeClasses) GlobalDefaultPriorityClass() (string, int32, bool, error) {
	name, found := "", false
	var value int32
	for _, n := range sortedKeys(f.defaults) {
		if v := f.defaults[n]; !found || v < value {
			name, value, found = n, v, true
		}
	}
	return name, value, found, nil
}

var classes = fakeClasses{
	wpc: map[string]int32{"wl-high": 10000, "wl-low": -5},
	pc:  map[string]int32{"pod-high": 2000},
}

func TestJobToWorkloadConversion(t *testing.T) {
	job := baseJob(func(j *Job) {
		j.UID = "uid-1"
		j.Spec.Template.Labels = map[string]string{"app": "x", "batch.kubernetes.io/job-name": "job", "controller-uid": "u"}
	})
	wl, err := JobToWorkload(job, classes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := job.Spec.Template.DeepCopy()
	tmpl.Labels = map[string]string{"app": "x"}
	want := &Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: KueueAPIVersion, Kind: KindWorkload},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job", UID: "uid-1"},
		Spec: WorkloadSpec{
			PodSets:   []PodSet{{Name: "main", Count: 3, Template: *tmpl}},
			QueueName: "lq",
			Priority:  ptr[int32](0),
			Active:    ptr(true),
		},
	}
	if diff := cmp.Diff(want, wl); diff != "" {
		t.Errorf("workload (-want +got):\n%s", diff)
	}
	if err := Validate(wl); err != nil {
		t.Errorf("converted workload invalid: %v", err)
	}
	if job.Spec.Template.Labels["controller-uid"] != "u" {
		t.Error("JobToWorkload modified the Job")
	}
}

func TestJobToWorkloadPodCount(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parallelism *int32
		completions *int32
		want        int32
	}{
		{"parallelism defaults to 1", nil, nil, 1},
		{"completions nil means parallelism", ptr[int32](4), nil, 4},
		{"completions below parallelism", ptr[int32](4), ptr[int32](2), 2},
		{"completions above parallelism", ptr[int32](4), ptr[int32](10), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := baseJob(func(j *Job) { j.Spec.Parallelism, j.Spec.Completions = tc.parallelism, tc.completions })
			wl, err := JobToWorkload(job, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := wl.Spec.PodSets[0].Count; got != tc.want {
				t.Errorf("count = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestJobToWorkloadPriority(t *testing.T) {
	withDefaults := classes
	withDefaults.defaults = map[string]int32{"default-b": 300, "default-a": 100, "default-c": 200}
	for _, tc := range []struct {
		name     string
		label    string
		podClass string
		classes  PriorityClasses
		want     WorkloadSpec
	}{
		{"KEP-973 case 1: label and pod class, the label wins", "wl-high", "pod-high", classes,
			WorkloadSpec{PriorityClassName: "wl-high", PriorityClassSource: WorkloadPriorityClassSrc, Priority: ptr[int32](10000)}},
		{"KEP-973 case 2: label only", "wl-low", "", classes,
			WorkloadSpec{PriorityClassName: "wl-low", PriorityClassSource: WorkloadPriorityClassSrc, Priority: ptr[int32](-5)}},
		{"KEP-973 case 3: pod class only", "", "pod-high", classes,
			WorkloadSpec{PriorityClassName: "pod-high", PriorityClassSource: PodPriorityClassSrc, Priority: ptr[int32](2000)}},
		{"globalDefault PriorityClass, lowest value wins", "", "", withDefaults,
			WorkloadSpec{PriorityClassName: "default-a", PriorityClassSource: PodPriorityClassSrc, Priority: ptr[int32](100)}},
		{"a named class beats the global default", "", "pod-high", withDefaults,
			WorkloadSpec{PriorityClassName: "pod-high", PriorityClassSource: PodPriorityClassSrc, Priority: ptr[int32](2000)}},
		{"no class at all", "", "", classes, WorkloadSpec{Priority: ptr[int32](0)}},
		{"nil PriorityClasses", "", "", nil, WorkloadSpec{Priority: ptr[int32](0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := baseJob(func(j *Job) {
				if tc.label != "" {
					j.Labels[PriorityClassLabel] = tc.label
				}
				j.Spec.Template.Spec.PriorityClassName = tc.podClass
			})
			wl, err := JobToWorkload(job, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			got := WorkloadSpec{PriorityClassName: wl.Spec.PriorityClassName, PriorityClassSource: wl.Spec.PriorityClassSource, Priority: wl.Spec.Priority}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("priority (-want +got):\n%s", diff)
			}
			if err := Validate(wl); err != nil {
				t.Errorf("converted workload invalid: %v", err)
			}
		})
	}
}

func TestJobToWorkloadMinParallelism(t *testing.T) {
	job := baseJob(func(j *Job) {
		j.Spec.Parallelism, j.Spec.Completions = ptr[int32](10), ptr[int32](10)
		j.Annotations = map[string]string{JobMinParallelismAnnot: "4"}
	})
	wl, err := JobToWorkload(job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps := wl.Spec.PodSets[0]; ps.Count != 10 || ps.MinCount == nil || *ps.MinCount != 4 {
		t.Errorf("podSet count=%d minCount=%v", ps.Count, ps.MinCount)
	}
}

func TestJobToWorkloadErrors(t *testing.T) {
	const job = "Job/team-a/job"
	for _, tc := range []struct {
		name string
		job  *Job
		want []FieldError
	}{
		{"queue-name label required", baseJob(func(j *Job) { delete(j.Labels, QueueNameLabel) }),
			[]FieldError{{job, "metadata.labels[kueue.x-k8s.io/queue-name]", "Required value: jetqueue only queues Jobs that name their LocalQueue in this label"}}},
		{"unknown WorkloadPriorityClass", baseJob(func(j *Job) { j.Labels[PriorityClassLabel] = "missing" }),
			[]FieldError{{job, "metadata.labels[kueue.x-k8s.io/priority-class]", `Invalid value: "missing": WorkloadPriorityClass not found`}}},
		{"unknown pod PriorityClass", baseJob(func(j *Job) { j.Spec.Template.Spec.PriorityClassName = "missing" }),
			[]FieldError{{job, "spec.template.spec.priorityClassName", `Invalid value: "missing": PriorityClass not found`}}},
		{"min-parallelism must be below the pod count", baseJob(func(j *Job) {
			j.Spec.Completions = ptr[int32](2)
			j.Annotations = map[string]string{JobMinParallelismAnnot: "2"}
		}), []FieldError{{job, "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", "Invalid value: 2: must be at least 1 and less than the Job's pod count min(parallelism, completions) = 2"}}},
		{"zero parallelism cannot be queued", baseJob(func(j *Job) { j.Spec.Parallelism = ptr[int32](0) }),
			[]FieldError{{job, "spec.parallelism", "Invalid value: 0: must be greater than 0 for the Job to be queued (it is the workload's pod count)"}}},
		{"zero completions cannot be queued", baseJob(func(j *Job) { j.Spec.Completions = ptr[int32](0) }),
			[]FieldError{{job, "spec.completions", "Invalid value: 0: must be greater than 0 for the Job to be queued (it is the workload's pod count)"}}},
		{"invalid Job is refused", baseJob(func(j *Job) { j.Spec.Template.Spec.Containers = nil }),
			[]FieldError{{job, "spec.template.spec.containers", "Required value"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl, err := JobToWorkload(tc.job, classes)
			if wl != nil {
				t.Errorf("got a workload")
			}
			diffErrors(t, tc.want, err)
		})
	}
	if _, err := JobToWorkload(nil, nil); err == nil {
		t.Error("JobToWorkload(nil) must fail")
	}
}

// A Job with only generateName is valid and converts with an empty name and
// the same generateName; whoever stores it assigns the name.
func TestJobToWorkloadGenerateName(t *testing.T) {
	job := baseJob(func(j *Job) { j.Name, j.GenerateName = "", "sample-job-" })
	wl, err := JobToWorkload(job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wl.Name != "" || wl.GenerateName != "sample-job-" || ObjectRef(wl) != "Workload/team-a/sample-job-" {
		t.Errorf("name=%q generateName=%q ref=%q", wl.Name, wl.GenerateName, ObjectRef(wl))
	}
	if err := Validate(wl); err != nil {
		t.Error(err)
	}
}
