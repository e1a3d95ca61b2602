package bridge

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/events"
)

var (
	spotToleration = corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	spotFlavor     = api.ResourceFlavorSpec{NodeLabels: map[string]string{"instance": "spot"}, Tolerations: []corev1.Toleration{spotToleration}}
	userSelector   = map[string]string{"disk": "ssd"}
	// stopped and running are the two states of a Job with parallelism 2
	// and the user's nodeSelector, admitted on the spot flavor.
	stopped = jobState{Suspended: true, NodeSelector: userSelector, Parallelism: 2}
	running = jobState{NodeSelector: map[string]string{"disk": "ssd", "instance": "spot"},
		Tolerations: []corev1.Toleration{spotToleration}, Parallelism: 2, Admitted: true, Original: true}
)

// patches counts the bridge's writes to Jobs.
func (e *env) patches() int {
	n := 0
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

func setReady(n int32) func(*batchv1.Job) { return func(j *batchv1.Job) { j.Status.Ready = &n } }

// TestJobLifecycle follows one Job through everything the bridge does:
// suspended and submitted; started on admission with the flavor's
// nodeLabels and tolerations; PodsReady once its pods are; stopped with
// its template restored on eviction; started again on readmission; a
// restart of the bridge in the middle changes nothing; finished on
// completion; its workload deleted with it.
func TestJobLifecycle(t *testing.T) {
	unlabelled := newJob("team-a", "plain", "uid-plain", 1, nil)
	unlabelled.Labels = nil
	e := newEnv(t, unlabelled)
	e.flavor("spot", spotFlavor)
	stop := e.start()
	const ns, name = "team-a", "train"
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new Job suspended", e.jobIs(ns, name, stopped))
	eventually(t, "new Job submitted", e.callsAre("submit", "submit team-a/train"))

	e.admit(ns, name, "spot", 2)
	eventually(t, "admitted Job started", e.jobIs(ns, name, running))
	var orig podSetInfo
	if err := json.Unmarshal([]byte(e.job(ns, name).Annotations[AnnotationOriginal]), &orig); err != nil || orig.NodeSelector["disk"] != "ssd" || len(orig.NodeSelector) != 1 {
		t.Fatalf("original template annotation: %+v, %v", orig, err)
	}

	e.editJob(ns, name, setReady(1))
	e.editJob(ns, name, setReady(2))
	eventually(t, "PodsReady once all pods are ready", e.callsAre("podsready", "podsready team-a/train"))

	e.evict(ns, name, "PodsReadyTimeout")
	eventually(t, "evicted Job stopped, template restored", e.jobIs(ns, name, stopped))
	e.editJob(ns, name, setReady(0)) // the Job controller removes the pods

	e.admit(ns, name, "spot", 2)
	eventually(t, "readmitted Job started again", e.jobIs(ns, name, running))
	e.editJob(ns, name, setReady(2))
	eventually(t, "PodsReady for the new admission", e.callsAre("podsready", "podsready team-a/train", "podsready team-a/train"))

	stop()
	before := e.patches()
	e.start()
	e.editJob(ns, name, func(j *batchv1.Job) {
		j.Status.Succeeded = 2
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	})
	eventually(t, "completed Job finished", e.callsAre("finish", `finish team-a/train {"succeeded":true}`))
	if err := e.callsAre("submit", "submit team-a/train")(); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if err := e.callsAre("podsready", "podsready team-a/train", "podsready team-a/train")(); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if n := e.patches(); n != before {
		t.Errorf("the restarted bridge wrote the Job %d times, want 0", n-before)
	}

	if err := e.kube.BatchV1().Jobs(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job's Events tell its story", e.eventsAre(ns, name, map[string]int32{
		"Suspended: Suspended until jetqueue admits its workload": 1,
		"CreatedWorkload: Created Workload: team-a/train":         1,
		"Started: Admitted by clusterQueue cq":                    2,
		"Stopped: Workload evicted: PodsReadyTimeout":             1,
	}))
	eventually(t, "deleted Job's workload deleted", e.callsAre("delete", "delete team-a/train"))
	if err := e.callsAre("submit", "submit team-a/train")(); err != nil {
		t.Error(err)
	}
	if s := stateOf(e.job("team-a", "plain")); s.Suspended || s.Admitted {
		t.Errorf("a Job without the queue-name label was touched: %+v", s)
	}
}

// TestRestartConverges stops the bridge, changes the world while it is
// down, and checks that the restarted bridge reconciles the Job to the
// log (and the log to the Job) without repeating what it did before.
func TestRestartConverges(t *testing.T) {
	const ns, name = "team-a", "train"
	admitted := func(e *env) { e.admit(ns, name, "spot", 2); eventually(e.t, "started", e.jobIs(ns, name, running)) }
	tests := []struct {
		name      string
		before    func(e *env) // with the bridge running, after the Job was submitted
		whileDown func(e *env)
		want      *jobState // nil: the Job is gone
		calls     []string
	}{{
		name:      "admitted while down: started",
		whileDown: func(e *env) { e.admit(ns, name, "spot", 2) },
		want:      &running,
		calls:     []string{"submit team-a/train"},
	}, {
		name:      "evicted while down: stopped",
		before:    admitted,
		whileDown: func(e *env) { e.evict(ns, name, "Preempted") },
		want:      &stopped,
		calls:     []string{"submit team-a/train"},
	}, {
		name:      "evicted and readmitted while down: restarted under the new admission",
		before:    admitted,
		whileDown: func(e *env) { e.evict(ns, name, "Preempted"); e.admit(ns, name, "spot", 2) },
		want:      &running,
		calls:     []string{"submit team-a/train"},
	}, {
		name:   "deactivated while down: stopped",
		before: admitted,
		whileDown: func(e *env) {
			e.publish(events.Deactivated, events.WorkloadSubject(ns, name), &events.WorkloadRef{Namespace: ns, Name: name})
		},
		want:  &stopped,
		calls: []string{"submit team-a/train"},
	}, {
		name: "deleted while down: workload deleted",
		whileDown: func(e *env) {
			if err := e.kube.BatchV1().Jobs(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		},
		calls: []string{"submit team-a/train", "delete team-a/train"},
	}, {
		name:   "recreated while down: the old workload deleted, the new Job submitted",
		before: admitted,
		whileDown: func(e *env) {
			if err := e.kube.BatchV1().Jobs(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
			if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-2", 2, userSelector), metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		},
		want:  &stopped,
		calls: []string{"submit team-a/train", "delete team-a/train", "submit team-a/train"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.flavor("spot", spotFlavor)
			stop := e.start()
			if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "submitted", e.callsAre("submit", "submit team-a/train"))
			eventually(t, "suspended", e.jobIs(ns, name, stopped))
			if tc.before != nil {
				tc.before(e)
			}
			stop()
			tc.whileDown(e)
			e.start()
			if tc.want != nil {
				eventually(t, "Job reconciled", e.jobIs(ns, name, *tc.want))
			}
			eventually(t, "calls", e.callsAre("", tc.calls...))
			if tc.want != nil && tc.want.Admitted {
				// Nothing more happens: ready pods would be reported, but
				// none are.
				if err := e.callsAre("", tc.calls...)(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestForeignWorkload: a workload of the Job's name that the bridge did not
// submit is never deleted; the Job waits, suspended.
func TestForeignWorkload(t *testing.T) {
	const ns, name = "team-a", "train"
	e := newEnv(t)
	h := map[string][]string{"Idempotency-Key": {"someone-else"}}
	other := newJob(ns, name, "", 1, nil)
	other.Spec.Suspend = new(true)
	body, _ := submission(other)
	if status, _, err := e.api.Do(e.ctx, "POST", "/v1/workloads", h, body); err != nil || status != 202 {
		t.Fatalf("direct submission: %d %v", status, err)
	}
	e.start() // after the submission is in the log, which the bridge reads before it acts
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job waits suspended", e.jobIs(ns, name, stopped))
	eventually(t, "the Job says why", e.eventsAre(ns, name, map[string]int32{
		"Suspended: Workload team-a/train exists and is not this Job's; waiting until it is deleted": 1}))
	if err := e.kube.BatchV1().Jobs(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Job of another name is handled after this one's deletion was.
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, "marker", "uid-m", 1, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the marker Job submitted", e.callsAre("submit team-a/marker", "submit team-a/marker"))
	if d := e.api.callsOf("delete"); len(d) != 0 {
		t.Errorf("the bridge deleted a workload it did not submit: %v", d)
	}
}

// TestRefusedJobSaysWhy: a Job jetqueue refuses stays suspended, and a
// Warning Event on it carries the API's error, field by field.
func TestRefusedJobSaysWhy(t *testing.T) {
	const ns, name = "team-a", "bad"
	e := newEnv(t)
	e.start()
	j := newJob(ns, name, "uid-bad", 1, nil)
	j.Labels[refuseLabel] = "yes"
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refusal is told on the Job", e.eventsAre(ns, name, map[string]int32{
		"Suspended: Suspended until jetqueue admits its workload":                                                         1,
		"NotQueued: Not queued: spec.podSets[0].template.spec.containers[0].resources.requests.cpu: must be non-negative": 1,
	}))
	if s := stateOf(e.job(ns, name)); !s.Suspended {
		t.Errorf("a refused Job runs: %+v", s)
	}
}

// TestConflictKeepsUserEdits: a write that loses to a concurrent edit is
// computed again on the edited Job, which keeps the edit.
func TestConflictKeepsUserEdits(t *testing.T) {
	const ns, name = "team-a", "train"
	e := newEnv(t)
	jobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	var conflicts atomic.Int32
	e.kube.PrependReactor("patch", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) > 1 {
			return false, nil, nil
		}
		// The user labels the Job just before the bridge's write lands.
		obj, err := e.kube.Tracker().Get(jobs, ns, name)
		if err != nil {
			return true, nil, err
		}
		j := obj.(*batchv1.Job).DeepCopy()
		j.Labels["owner"] = "me"
		if err := e.kube.Tracker().Update(jobs, j, ns); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(jobs.GroupResource(), name, fmt.Errorf("the object has been modified"))
	})
	e.start()
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "suspended despite the conflict", e.jobIs(ns, name, stopped))
	if got := e.job(ns, name).Labels["owner"]; got != "me" || conflicts.Load() < 2 {
		t.Errorf("owner label %q after %d patches: the user's edit was lost", got, conflicts.Load())
	}
}

// TestExpiredWorkloadOfCompletedJob: the workload of a completed Job
// expires (the log's retention ends it) while the Job stays in the
// cluster. The bridge forgets the workload and leaves the Job alone: it
// neither submits it again nor finishes or deletes anything, even when
// the Job changes or the bridge restarts.
func TestExpiredWorkloadOfCompletedJob(t *testing.T) {
	e := newEnv(t)
	e.flavor("spot", spotFlavor)
	stop := e.start()
	const ns, name = "team-a", "done"
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, name, "uid-1", 2, userSelector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new Job submitted", e.callsAre("submit", "submit team-a/done"))
	e.admit(ns, name, "spot", 2)
	eventually(t, "admitted Job started", e.jobIs(ns, name, running))
	e.editJob(ns, name, func(j *batchv1.Job) {
		j.Status.Succeeded = 2
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	})
	eventually(t, "completed Job finished", e.callsAre("finish", `finish team-a/done {"succeeded":true}`))
	e.publish(events.WorkloadExpired, events.WorkloadSubject(ns, name), &events.WorkloadRef{Namespace: ns, Name: name})
	e.editJob(ns, name, func(j *batchv1.Job) { j.Annotations["touched"] = "1" })
	// A restarted bridge catches up with the log (the expiry included)
	// before it reconciles every Job; a marker Job created after is
	// submitted once the completed one has been looked at.
	stop()
	e.start()
	if _, err := e.kube.BatchV1().Jobs(ns).Create(e.ctx, newJob(ns, "marker", "uid-m", 1, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the marker Job submitted", e.callsAre("submit", "submit team-a/done", "submit team-a/marker"))
	for prefix, want := range map[string][]string{"finish": {`finish team-a/done {"succeeded":true}`}, "delete": nil} {
		if err := e.callsAre(prefix, want...)(); err != nil {
			t.Errorf("after the expiry: %v", err)
		}
	}
}
