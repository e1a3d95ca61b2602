package api

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Labels Kubernetes' Job controller adds to the pod template; Kueue strips
// them from the workload's podSet so they do not leak into comparisons.
var jobManagedLabels = []string{"job-name", "controller-uid", batchv1.JobNameLabel, batchv1.ControllerUidLabel}

var (
	queueLabelPath    = field.NewPath("metadata", "labels").Key(QueueNameLabel)
	priorityLabelPath = field.NewPath("metadata", "labels").Key(PriorityClassLabel)
	minParallelPath   = field.NewPath("metadata", "annotations").Key(JobMinParallelismAnnot)
)

// jobPodCount is Kueue's podsCount: min(parallelism, completions), with
// parallelism defaulting to 1 as the API server would and a nil completions
// meaning "as many as parallelism".
func jobPodCount(job *Job) int32 {
	n := int32(1)
	if job.Spec.Parallelism != nil {
		n = *job.Spec.Parallelism
	}
	if c := job.Spec.Completions; c != nil && *c < n {
		n = *c
	}
	return n
}

// validateJob covers what Kueue's Job webhook checks plus what the API server
// would refuse among the fields jetqueue reads. Metadata is validated by the
// caller. A Job may have only generateName: jetqueue's ingest, like the API
// server, is expected to assign the name before storing it.
func validateJob(job *Job) field.ErrorList {
	var errs field.ErrorList
	if q := job.Labels[QueueNameLabel]; q == "" {
		errs = append(errs, field.Required(queueLabelPath, "jetqueue only queues Jobs that name their LocalQueue in this label"))
	} else {
		errs = append(errs, dnsSubdomain(q, queueLabelPath)...)
	}
	if pc := job.Labels[PriorityClassLabel]; pc != "" {
		errs = append(errs, dnsSubdomain(pc, priorityLabelPath)...)
	}
	sp := field.NewPath("spec")
	if p := job.Spec.Parallelism; p != nil && *p < 0 {
		errs = append(errs, field.Invalid(sp.Child("parallelism"), int64(*p), isNegativeMsg))
	}
	if c := job.Spec.Completions; c != nil && *c < 0 {
		errs = append(errs, field.Invalid(sp.Child("completions"), int64(*c), isNegativeMsg))
	}
	if n := jobPodCount(job); n > MaxPodSetCount {
		fld := sp.Child("parallelism")
		if c := job.Spec.Completions; c != nil && *c == n {
			fld = sp.Child("completions")
		}
		errs = append(errs, field.Invalid(fld, int64(n), fmt.Sprintf("the pod count min(parallelism, completions) must be less than or equal to %d", MaxPodSetCount)))
	}
	if _, err := minParallelism(job); err != nil {
		errs = append(errs, err)
	}
	if len(job.Spec.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(sp.Child("template", "spec", "containers"), ""))
	}
	errs = append(errs, validatePodSpec(&job.Spec.Template.Spec, sp.Child("template", "spec"))...)
	return errs
}

// minParallelism reads the partial-admission annotation; nil when absent.
func minParallelism(job *Job) (*int32, *field.Error) {
	s, ok := job.Annotations[JobMinParallelismAnnot]
	if !ok {
		return nil, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, field.Invalid(minParallelPath, s, "must be an integer")
	}
	count := jobPodCount(job)
	if v < 1 || v >= int64(count) {
		return nil, field.Invalid(minParallelPath, v,
			fmt.Sprintf("must be at least 1 and less than the Job's pod count min(parallelism, completions) = %d", count))
	}
	m := int32(v)
	return &m, nil
}

// JobToWorkload converts a batch/v1 Job carrying the kueue.x-k8s.io/queue-name
// label into the Workload Kueue's job integration would create, with these
// jetqueue choices: the Workload keeps the Job's namespace, name,
// generateName and uid (Kueue names it "job-<name>-<hash>"); the queue name
// comes from the label only (not the deprecated annotation). The Job is
// validated as by Validate first. A Job whose pod count
// min(parallelism, completions) is 0 is refused on the field responsible,
// since Kueue's CRD requires count >= 1 and such a Job would never be
// admitted. Priority follows KEP-973 (see PriorityClasses); classes may be
// nil, meaning no classes exist. A class lookup that fails is returned as
// a *ClassLookupError, not as Errors: the Job may be valid. The result is
// defaulted; suspension is irrelevant.
func JobToWorkload(job *Job, classes PriorityClasses) (*Workload, error) {
	if job == nil {
		return nil, Errors{{Object: KindJob, Message: "object is nil"}}
	}
	ref := ObjectRef(job)
	errs := append(validateMeta(&job.ObjectMeta, true, true), validateJob(job)...)
	count := jobPodCount(job)
	if count == 0 {
		fld := field.NewPath("spec", "parallelism")
		if c := job.Spec.Completions; c != nil && *c == 0 {
			fld = field.NewPath("spec", "completions")
		}
		errs = append(errs, field.Invalid(fld, int64(0), "must be greater than 0 for the Job to be queued (it is the workload's pod count)"))
	}
	prio, perr, lerr := resolveJobPriority(job, classes)
	if perr != nil {
		errs = append(errs, perr)
	}
	if len(errs) > 0 {
		return nil, fromFieldErrors(ref, errs)
	}
	if lerr != nil {
		// Only a Job valid in every other way is answered with the
		// failed lookup: a retry could not make an invalid one valid.
		return nil, lerr
	}
	minCount, _ := minParallelism(job)

	tmpl := job.Spec.Template.DeepCopy()
	for _, l := range jobManagedLabels {
		delete(tmpl.Labels, l)
	}
	priority := prio.value
	wl := &Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: KueueAPIVersion, Kind: KindWorkload},
		ObjectMeta: metav1.ObjectMeta{
			Name:         job.Name,
			GenerateName: job.GenerateName,
			Namespace:    job.Namespace,
			UID:          job.UID,
			Annotations:  expectedRuntimeOf(job.Annotations),
		},
		Spec: WorkloadSpec{
			PodSets: []PodSet{{
				Name:     DefaultPodSetName,
				Template: *tmpl,
				Count:    count,
				MinCount: minCount,
			}},
			QueueName:           job.Labels[QueueNameLabel],
			PriorityClassName:   prio.className,
			PriorityClassSource: prio.source,
			Priority:            &priority,
		},
	}
	Default(wl)
	return wl, nil
}
