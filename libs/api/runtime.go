package api

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ExpectedRuntimeAnnot is the run time a submitter expects of a workload
// once admitted (a Go duration, e.g. "90m"): ETAs (libs/eta) assume it in
// place of the recorded run times of similar workloads.
const ExpectedRuntimeAnnot = "jetqueue.dev/expected-runtime"

// MaxExpectedRuntime bounds ExpectedRuntimeAnnot.
const MaxExpectedRuntime = 31 * 24 * time.Hour

// ExpectedRuntime reads ExpectedRuntimeAnnot: false when absent; an error
// naming the annotation when it is not a duration from 1s to
// MaxExpectedRuntime.
func ExpectedRuntime(annotations map[string]string) (time.Duration, bool, *field.Error) {
	v, ok := annotations[ExpectedRuntimeAnnot]
	if !ok {
		return 0, false, nil
	}
	p := field.NewPath("metadata", "annotations").Key(ExpectedRuntimeAnnot)
	if len(v) > 32 {
		return 0, false, field.Invalid(p, v[:32]+"…", "must be a duration such as 90m")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, false, field.Invalid(p, v, "must be a duration such as 90m")
	}
	if d < time.Second || d > MaxExpectedRuntime {
		return 0, false, field.Invalid(p, v, fmt.Sprintf("must be from 1s to %s", MaxExpectedRuntime))
	}
	return d, true, nil
}

// expectedRuntimeOf keeps, of a Job's annotations, the one its Workload
// carries over.
func expectedRuntimeOf(annotations map[string]string) map[string]string {
	v, ok := annotations[ExpectedRuntimeAnnot]
	if !ok {
		return nil
	}
	return map[string]string{ExpectedRuntimeAnnot: v}
}
