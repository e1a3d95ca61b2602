package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/util/retry"
)

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// reconcile makes one Job and its workload agree (see the package comment).
func (b *Bridge) reconcile(ctx context.Context, key string) error {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	job, err := b.jobOf(ns, name)
	if err != nil {
		return err
	}
	// The memo first, then the log: the follower records a submission
	// in the log's state before it forgets the memo.
	b.mu.Lock()
	inFlight, hasInFlight := b.submitted[key]
	b.mu.Unlock()
	w, known := b.st.get(key)
	if job == nil {
		if known && b.owned(ns, name, w) {
			return b.once(key, "delete", w.submitID, func() error {
				b.log.Info("Job gone; deleting its workload", zap.String("job", key))
				return b.call(ctx, http.MethodDelete, workloadPath(ns, name, ""), nil, nil)
			})
		}
		return nil
	}
	if known && w.submitID != b.cfg.SubmissionID(ns, IdempotencyKey(ns, name, string(job.UID))) {
		// The workload under this name is not this Job's: an earlier Job
		// of the same name (deleted while the bridge was down), or a
		// workload someone submitted directly.
		if b.owned(ns, name, w) {
			return b.once(key, "delete", w.submitID, func() error {
				b.log.Info("deleting the workload of an earlier Job of this name", zap.String("job", key))
				return b.call(ctx, http.MethodDelete, workloadPath(ns, name, ""), nil, nil)
			})
		}
		b.log.Warn("a workload of this name exists that the bridge did not submit; the Job waits until it is deleted", zap.String("job", key))
		_, err := b.stop(ctx, job, reasonSuspended, "Workload "+key+" exists and is not this Job's; waiting until it is deleted")
		return err
	}
	if done, succeeded := finished(job); done {
		if known && !w.finished {
			body, _ := json.Marshal(map[string]bool{"succeeded": succeeded})
			return b.once(key, "finish", w.submitID, func() error {
				return b.call(ctx, http.MethodPost, workloadPath(ns, name, "finish"), nil, body)
			})
		}
		return nil
	}
	switch {
	case !known:
		if job, err = b.stop(ctx, job, reasonSuspended, "Suspended until jetqueue admits its workload"); err != nil {
			return err
		}
		if hasInFlight && inFlight == IdempotencyKey(ns, name, string(job.UID)) {
			return nil // its WorkloadSubmitted is on its way
		}
		return b.submit(ctx, job)
	case w.finished:
		// Finished through the API while the Job still runs: the Job is
		// the user's to end.
		return nil
	case w.admission == nil:
		_, err := b.stop(ctx, job, reasonStopped, w.notAdmitted())
		return err
	}
	seq, started := runningSeq(job)
	if started && seq != w.admittedSeq {
		// Started under an earlier admission: Kueue stops the Job before
		// it runs under the next one.
		if job, err = b.stop(ctx, job, reasonStopped, "Admitted again; restarting under the new admission"); err != nil {
			return err
		}
		started = false
	}
	if !started {
		if !suspended(job) || job.Status.StartTime != nil {
			// The template only changes on a suspended Job that has not
			// started (a Job the user unsuspended, say).
			if job, err = b.stop(ctx, job, reasonStopped, "Stopped before it starts under its admission"); err != nil {
				return err
			}
		}
		flavors := b.st.flavorSpecs(admittedFlavors(w.admission))
		startedNow := false
		_, err := b.patch(ctx, job, func(j *batchv1.Job) error {
			// Decided on the Job being patched: a retry reads it again.
			if _, again := runningSeq(j); again {
				startedNow = false
				return nil
			}
			startedNow = true
			return start(j, w.admission, w.admittedSeq, flavors)
		})
		if err == nil && startedNow {
			b.log.Info("admitted; Job started", zap.String("job", key), zap.String("clusterQueue", w.admission.ClusterQueue),
				zap.Strings("flavors", admittedFlavors(w.admission)))
			b.record.Eventf(job, corev1.EventTypeNormal, reasonStarted, "Admitted by clusterQueue %s", w.admission.ClusterQueue)
		}
		return err
	}
	// Started under this admission. A Job the user suspended stays so.
	if suspended(job) || w.podsReady || !podsReady(job) {
		return nil
	}
	return b.once(key, "podsready", strconv.FormatUint(w.admittedSeq, 10), func() error {
		return b.call(ctx, http.MethodPost, workloadPath(ns, name, "podsready"), nil, nil)
	})
}

// action is one workload action on one Job's workload.
type action struct{ key, verb string }

// verbs are the actions once remembers.
var verbs = []string{"delete", "finish", "podsready"}

// once posts an action unless it was posted for the same subject (a
// workload's submission, an admission) already; a failed post is
// forgotten, so that the retry posts it.
func (b *Bridge) once(key, verb, subject string, post func() error) error {
	a := action{key, verb}
	b.mu.Lock()
	if b.done[a] == subject {
		b.mu.Unlock()
		return nil
	}
	b.done[a] = subject
	b.mu.Unlock()
	if err := post(); err != nil {
		b.mu.Lock()
		delete(b.done, a)
		b.mu.Unlock()
		return err
	}
	return nil
}

// owned: the workload is one the bridge submitted for a Job.
func (b *Bridge) owned(ns, name string, w workload) bool {
	return w.submitID == b.cfg.SubmissionID(ns, IdempotencyKey(ns, name, w.uid)) ||
		w.submitID == b.cfg.SubmissionID(ns, IdempotencyKey(ns, name, ""))
}

// submit posts the Job as a workload, keyed by its uid.
func (b *Bridge) submit(ctx context.Context, job *batchv1.Job) error {
	body, err := submission(job)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", IdempotencyKey(job.Namespace, job.Name, string(job.UID)))
	// Remembered before the call, since the follower may read the
	// WorkloadSubmitted (and forget the memo) before the call returns.
	key := job.Namespace + "/" + job.Name
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	b.mu.Lock()
	if b.refused[key] == digest {
		b.mu.Unlock()
		return nil
	}
	delete(b.refused, key)
	b.submitted[key] = h.Get("Idempotency-Key")
	b.mu.Unlock()
	status, answer, err := b.cfg.API.Do(ctx, http.MethodPost, "/v1/workloads", h, body)
	if err != nil || (status != http.StatusOK && status != http.StatusAccepted) {
		b.mu.Lock()
		delete(b.submitted, key)
		b.mu.Unlock()
	}
	switch {
	case err != nil:
		return err
	case status == http.StatusOK || status == http.StatusAccepted:
		b.log.Info("Job submitted", zap.String("job", key), zap.Int("status", status))
		if status == http.StatusAccepted {
			b.record.Eventf(job, corev1.EventTypeNormal, reasonCreatedWorkload, "Created Workload: %s", key)
		}
		return nil
	case status == http.StatusBadRequest || status == http.StatusConflict:
		// Not something a retry mends: the Job is invalid for jetqueue,
		// or its name is taken. An edit of the Job, or the deletion of
		// the other workload, queues it again.
		b.log.Warn("Job not queued", zap.String("job", key), zap.Int("status", status),
			zap.ByteString("answer", answer))
		b.mu.Lock()
		b.refused[key] = digest
		b.mu.Unlock()
		b.record.Event(job, corev1.EventTypeWarning, reasonNotQueued, eventMessage(status, answer))
		return nil
	}
	return fmt.Errorf("submit: status %d: %s", status, answer)
}

// call performs one workload action; a workload already gone is success.
func (b *Bridge) call(ctx context.Context, method, path string, header http.Header, body []byte) error {
	if body != nil {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Content-Type", "application/json")
	}
	status, answer, err := b.cfg.API.Do(ctx, method, path, header, body)
	if err != nil {
		return err
	}
	if status/100 == 2 || status == http.StatusNotFound {
		return nil
	}
	return fmt.Errorf("%s %s: status %d: %s", method, path, status, answer)
}

func workloadPath(ns, name, verb string) string {
	p := "/v1/workloads/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// stop brings a Job to the stopped state: suspended, with whatever an
// admission changed undone. As a real API server only lets the template
// change while the Job is suspended and not started, this takes up to
// three writes, as Kueue's: suspend; clear status.startTime; restore the
// template and drop the annotations. A Job already stopped is not written.
func (b *Bridge) stop(ctx context.Context, job *batchv1.Job, reason, message string) (*batchv1.Job, error) {
	var err error
	// The Job read may be stale (the informer lags this bridge's own
	// writes), so what a write changes is decided on the Job it patches;
	// the stop is recorded once, on the write that made it.
	wrote := false
	if !suspended(job) {
		if job, err = b.patch(ctx, job, func(j *batchv1.Job) error {
			if wrote = !suspended(j); wrote {
				j.Spec.Suspend = new(true)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if wrote {
			b.log.Info("Job suspended", zap.String("job", job.Namespace+"/"+job.Name))
			b.record.Event(job, corev1.EventTypeNormal, reason, message)
		}
	}
	if job.Status.StartTime != nil {
		if job, err = b.cfg.Kube.BatchV1().Jobs(job.Namespace).Patch(ctx, job.Name, types.MergePatchType,
			[]byte(`{"status":{"startTime":null}}`), metav1.PatchOptions{FieldManager: fieldManager}, "status"); err != nil {
			return nil, fmt.Errorf("clear status.startTime: %w", err)
		}
	}
	if _, started := runningSeq(job); !started {
		return job, nil
	}
	restored := false
	if job, err = b.patch(ctx, job, func(j *batchv1.Job) error {
		if _, restored = runningSeq(j); !restored {
			return nil
		}
		return restore(j)
	}); err != nil {
		return nil, err
	}
	if restored {
		b.log.Info("Job stopped; pod template restored", zap.String("job", job.Namespace+"/"+job.Name))
		if !wrote {
			b.record.Event(job, corev1.EventTypeNormal, reason, message)
		}
	}
	return job, nil
}

const fieldManager = "jetqueue-bridge"

// patch applies mutate to a copy of the Job and sends the difference as a
// strategic merge patch fenced by the resourceVersion it was computed
// from. On a conflict (someone else wrote the Job meanwhile) it reads the
// Job again and mutates that, so their change is kept. It returns the Job
// as written (or as read, when mutate changed nothing).
func (b *Bridge) patch(ctx context.Context, job *batchv1.Job, mutate func(*batchv1.Job) error) (*batchv1.Job, error) {
	jobs := b.cfg.Kube.BatchV1().Jobs(job.Namespace)
	cur := job
	var out *batchv1.Job
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		mod := cur.DeepCopy()
		if err := mutate(mod); err != nil {
			return err
		}
		p, err := mergePatch(cur, mod)
		if err != nil || p == nil {
			out = cur
			return err
		}
		out, err = jobs.Patch(ctx, cur.Name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil {
			cur = nil
		}
		return err
	})
	return out, err
}

// mergePatch is the strategic merge patch from one Job to another with the
// first one's resourceVersion as precondition; nil when they agree.
func mergePatch(from, to *batchv1.Job) ([]byte, error) {
	a, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	c, err := json.Marshal(to)
	if err != nil {
		return nil, err
	}
	p, err := strategicpatch.CreateTwoWayMergePatch(a, c, batchv1.Job{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	if from.ResourceVersion != "" {
		meta, _ := m["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			m["metadata"] = meta
		}
		meta["resourceVersion"] = from.ResourceVersion
	}
	return json.Marshal(m)
}
