package bridge

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Annotations the bridge owns on a Job. Everything else on the Job is the
// user's and is never written.
const (
	// AnnotationAdmission records the admission the Job runs under:
	// {"seq": <QuotaReserved stream sequence>, "clusterQueue": ...,
	// "podSetAssignments": [...]}. Present from start until stop.
	AnnotationAdmission = "jetqueue.io/admission"
	// AnnotationOriginal keeps the pod template fields (and parallelism)
	// as they were before the admission changed them, so that a stop can
	// restore them: {"nodeSelector":{...},"tolerations":[...],"parallelism":N}.
	AnnotationOriginal = "jetqueue.io/original-pod-set-info"
)

// admissionRecord is the content of AnnotationAdmission.
type admissionRecord struct {
	Seq uint64 `json:"seq"`
	scheduler.Admission
}

// podSetInfo is the content of AnnotationOriginal: the fields an admission
// changes, as they were.
type podSetInfo struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Parallelism  *int32              `json:"parallelism,omitempty"`
}

// managed: the bridge queues Jobs that name a LocalQueue.
func managed(job *batchv1.Job) bool { return job.Labels[api.QueueNameLabel] != "" }

func suspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// finished reports whether the Job completed or failed, and which.
func finished(job *batchv1.Job) (done, succeeded bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true
		case batchv1.JobFailed:
			return true, false
		}
	}
	return false, false
}

// runningSeq returns the sequence of the admission the Job was started
// under, if it carries one.
func runningSeq(job *batchv1.Job) (uint64, bool) {
	v, ok := job.Annotations[AnnotationAdmission]
	if !ok {
		return 0, false
	}
	var rec admissionRecord
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		// Unreadable: treat it as some other admission, so the Job is
		// stopped and restarted under the current one.
		return 0, true
	}
	return rec.Seq, true
}

// podsReady is KEP-349's readiness of a Job: ready + succeeded pods reach
// its parallelism (1 when unset).
func podsReady(job *batchv1.Job) bool {
	want := int32(1)
	if job.Spec.Parallelism != nil {
		want = *job.Spec.Parallelism
	}
	var ready int32
	if job.Status.Ready != nil {
		ready = *job.Status.Ready
	}
	return ready+job.Status.Succeeded >= want
}

// admittedFlavors lists, sorted, the flavors an admission assigned to the
// Job's podSet.
func admittedFlavors(adm *scheduler.Admission) []string {
	var out []string
	if ps := jobPodSet(adm); ps != nil {
		for _, f := range ps.Flavors {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// jobPodSet is the admission of a Job's single podSet.
func jobPodSet(adm *scheduler.Admission) *scheduler.PodSetAdmission {
	for i := range adm.PodSets {
		if adm.PodSets[i].Name == api.DefaultPodSetName {
			return &adm.PodSets[i]
		}
	}
	if len(adm.PodSets) == 1 {
		return &adm.PodSets[0]
	}
	return nil
}

// start changes a (suspended) Job to run under an admission, as Kueue's
// RunWithPodSetsInfo does: the flavors' nodeLabels join the pod template's
// nodeSelector, their tolerations join its tolerations, a partial
// admission lowers parallelism to the admitted count; the fields as they
// were are kept in AnnotationOriginal (unless a previous start already
// kept them), the admission goes in AnnotationAdmission, and the Job is
// unsuspended. flavors holds the specs of the admitted flavors.
func start(job *batchv1.Job, adm *scheduler.Admission, seq uint64, flavors map[string]api.ResourceFlavorSpec) error {
	spec := &job.Spec.Template.Spec
	if _, kept := job.Annotations[AnnotationOriginal]; !kept {
		orig, err := json.Marshal(podSetInfo{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, Parallelism: job.Spec.Parallelism})
		if err != nil {
			return err
		}
		setAnnotation(job, AnnotationOriginal, string(orig))
	}
	rec, err := json.Marshal(admissionRecord{Seq: seq, Admission: *adm})
	if err != nil {
		return err
	}
	setAnnotation(job, AnnotationAdmission, string(rec))
	for _, name := range admittedFlavors(adm) {
		f := flavors[name]
		if len(f.NodeLabels) > 0 {
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			// The scheduler only assigns a flavor whose nodeLabels agree
			// with the pod's nodeSelector, so this adds and never
			// overrides.
			maps.Copy(spec.NodeSelector, f.NodeLabels)
		}
		for _, t := range f.Tolerations {
			if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, t) }) {
				spec.Tolerations = append(spec.Tolerations, t)
			}
		}
	}
	if ps := jobPodSet(adm); ps != nil && ps.Count > 0 && (job.Spec.Parallelism == nil || ps.Count < *job.Spec.Parallelism) {
		count := ps.Count
		job.Spec.Parallelism = &count
	}
	job.Spec.Suspend = new(bool)
	return nil
}

// restore undoes start on a suspended Job: the template fields and
// parallelism go back to AnnotationOriginal and both annotations go.
func restore(job *batchv1.Job) error {
	if v, ok := job.Annotations[AnnotationOriginal]; ok {
		var orig podSetInfo
		if err := json.Unmarshal([]byte(v), &orig); err != nil {
			return fmt.Errorf("annotation %s: %w", AnnotationOriginal, err)
		}
		job.Spec.Template.Spec.NodeSelector = orig.NodeSelector
		job.Spec.Template.Spec.Tolerations = orig.Tolerations
		if orig.Parallelism != nil {
			job.Spec.Parallelism = orig.Parallelism
		}
	}
	delete(job.Annotations, AnnotationOriginal)
	delete(job.Annotations, AnnotationAdmission)
	if len(job.Annotations) == 0 {
		job.Annotations = nil
	}
	return nil
}

func setAnnotation(job *batchv1.Job, k, v string) {
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[k] = v
}

// submission is the Job as submitted to ingest: its identity, labels, the
// user's annotations and its spec, suspended and with any admission
// undone, so that the workload is the Job the user wrote, whatever state
// the bridge left it in.
func submission(job *batchv1.Job) ([]byte, error) {
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, UID: job.UID,
			Labels: job.Labels, Annotations: maps.Clone(job.Annotations)},
		Spec: *job.Spec.DeepCopy(),
	}
	if err := restore(j); err != nil {
		return nil, err
	}
	j.Spec.Suspend = new(true)
	return json.Marshal(j)
}

// IdempotencyKey is the key a Job is submitted under: its uid, so that a
// resubmission of the same Job (after a restart of the bridge, say) is
// answered with the workload already there, while a new Job of the same
// name is a new workload. A Job without uid (only seen in tests) falls back
// to its name.
func IdempotencyKey(namespace, name, uid string) string {
	if uid == "" {
		return "kube-job/" + namespace + "/" + name
	}
	return "kube-job/" + uid
}
