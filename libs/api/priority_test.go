package api

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// failingClasses answers every lookup with err, as a store that cannot be
// reached does.
type failingClasses struct{ err error }

func (f failingClasses) WorkloadPriorityClass(string) (int32, bool, error) { return 0, false, f.err }
func (f failingClasses) PriorityClass(string) (int32, bool, error)         { return 0, false, f.err }
func (f failingClasses) GlobalDefaultPriorityClass() (string, int32, bool, error) {
	return "", 0, false, f.err
}

// A failed lookup is a *ClassLookupError naming the class, never a field
// error: a front door must not refuse a valid Job for good because the
// classes could not be read. A Job invalid in another way is still
// answered with its field errors.
func TestJobToWorkloadLookupFails(t *testing.T) {
	down := errors.New("nats: timeout")
	for _, tc := range []struct {
		name       string
		job        *Job
		kind, what string
	}{
		{"label", baseJob(func(j *Job) { j.Labels[PriorityClassLabel] = "low" }), KindWorkloadPriorityClass, "WorkloadPriorityClass low"},
		{"pod class", baseJob(func(j *Job) { j.Spec.Template.Spec.PriorityClassName = "high" }), KindPriorityClass, "PriorityClass high"},
		{"globalDefault", baseJob(), KindPriorityClass, "the globalDefault PriorityClass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl, err := JobToWorkload(tc.job, failingClasses{down})
			var le *ClassLookupError
			if wl != nil || !errors.As(err, &le) || !errors.Is(err, down) {
				t.Fatalf("got %v, %v; want a *ClassLookupError wrapping %v", wl, err, down)
			}
			var fe Errors
			if errors.As(err, &fe) {
				t.Errorf("a failed lookup is reported as field errors %v", fe)
			}
			if le.Kind != tc.kind || le.What() != tc.what {
				t.Errorf("lookup error names %s (%s), want %s (%s)", le.What(), le.Kind, tc.what, tc.kind)
			}
		})
	}
	invalid := baseJob(func(j *Job) { j.Spec.Template.Spec.Containers = nil })
	_, err := JobToWorkload(invalid, failingClasses{down})
	diffErrors(t, []FieldError{{"Job/team-a/job", "spec.template.spec.containers", "Required value"}}, err)
}

func TestClassPriority(t *testing.T) {
	both := fakeClasses{wpc: map[string]int32{"low": 10, "shared": 7}, pc: map[string]int32{"high": 2000, "shared": 900}}
	wl := func(name, source string) *Workload {
		w := &Workload{}
		w.Namespace, w.Name = "team-a", "w"
		w.Spec.PriorityClassName, w.Spec.PriorityClassSource = name, source
		return w
	}
	for _, tc := range []struct {
		name       string
		wl         *Workload
		wantSource string
		wantValue  int32
		wantErrs   []FieldError
	}{
		{"no class: Kueue's default, not the globalDefault", wl("", ""), "", 0, nil},
		{"WorkloadPriorityClass", wl("low", WorkloadPriorityClassSrc), WorkloadPriorityClassSrc, 10, nil},
		{"PriorityClass", wl("high", PodPriorityClassSrc), PodPriorityClassSrc, 2000, nil},
		{"no source finds the WorkloadPriorityClass", wl("low", ""), WorkloadPriorityClassSrc, 10, nil},
		{"no source finds the PriorityClass", wl("high", ""), PodPriorityClassSrc, 2000, nil},
		{"no source prefers the WorkloadPriorityClass", wl("shared", ""), WorkloadPriorityClassSrc, 7, nil},
		{"the source is followed", wl("shared", PodPriorityClassSrc), PodPriorityClassSrc, 900, nil},
		{"a WorkloadPriorityClass is not a PriorityClass", wl("low", PodPriorityClassSrc), "", 0,
			[]FieldError{{"Workload/team-a/w", "spec.priorityClassName", `Invalid value: "low": PriorityClass not found`}}},
		{"missing WorkloadPriorityClass", wl("gone", WorkloadPriorityClassSrc), "", 0,
			[]FieldError{{"Workload/team-a/w", "spec.priorityClassName", `Invalid value: "gone": WorkloadPriorityClass not found`}}},
		{"missing class of either kind", wl("gone", ""), "", 0,
			[]FieldError{{"Workload/team-a/w", "spec.priorityClassName", `Invalid value: "gone": WorkloadPriorityClass or PriorityClass not found`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.wl.DeepCopy()
			src, v, err := ClassPriority(tc.wl, both)
			if tc.wantErrs != nil {
				diffErrors(t, tc.wantErrs, err)
			} else if err != nil {
				t.Fatal(err)
			}
			if src != tc.wantSource || v != tc.wantValue {
				t.Errorf("got %q %d, want %q %d", src, v, tc.wantSource, tc.wantValue)
			}
			if diff := cmp.Diff(before, tc.wl); diff != "" {
				t.Errorf("ClassPriority changed the Workload (-before +after):\n%s", diff)
			}
		})
	}
	down := errors.New("no responders")
	_, _, err := ClassPriority(wl("low", ""), failingClasses{down})
	var le *ClassLookupError
	if !errors.As(err, &le) || le.What() != "WorkloadPriorityClass low" || !errors.Is(err, down) {
		t.Errorf("failed lookup: got %v", err)
	}
	if _, _, err := ClassPriority(wl("", ""), failingClasses{down}); err != nil {
		t.Errorf("a Workload without class looks nothing up, got %v", err)
	}
}
