// Package bridge admits Kubernetes batch/v1 Jobs through jetqueue, the way
// Kueue's job integration does: Jobs labelled kueue.x-k8s.io/queue-name
// are kept suspended until their workload is admitted, then run on the
// admitted flavors.
//
//	Job informer (labelled Jobs) ──┐
//	                               ├──▶ workqueue (namespace/name) ──▶ reconcile ──▶ Job patches
//	JQ_EVENTS (from snapshot) ─────┘       state: workloads, flavors        └──────▶ ingest API (submit, finish,
//	                                                                                  podsready, delete)
//
// One reconcile of a Job is equivalent to: read the Job from the informer
// and the workload from the folded event log, then make the Job agree
// with the log and the log agree with the Job:
//
//   - a Job without workload is suspended and submitted (keyed by its uid);
//   - a workload holding quota starts its Job: the admitted flavors'
//     nodeLabels and tolerations are added to the pod template, the
//     admission and the template as it was go in annotations, and the Job
//     is unsuspended;
//   - a workload that lost its quota (Evicted, Deactivated) stops its Job:
//     suspended, template restored, annotations removed;
//   - a started Job whose ready + succeeded pods reach its parallelism
//     reports PodsReady, once per admission;
//   - a completed or failed Job finishes its workload; a deleted Job
//     deletes it.
//
// Each of these is recorded as a Kubernetes Event on the Job (Suspended,
// CreatedWorkload, Started, Stopped, NotQueued), once, on the write that
// made it.
//
// Reconciling only starts once the informer has synced and the follower
// has caught up with the log, so a restarted bridge acts on the state the
// log records, never on a partial replay. Every step is idempotent: the
// Job's annotations say what was done to it, ingest answers a repeated
// submission with the workload already there. Writes to a Job are strategic
// merge patches of the fields the bridge owns (spec.suspend, parallelism,
// the template's nodeSelector and tolerations, its two annotations), fenced
// by the resourceVersion they were computed from and retried on conflict,
// so a user's concurrent edit is kept, never overwritten.
package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/kube"
	"github.com/jetqueue/jetqueue/libs/replay"
	"github.com/jetqueue/jetqueue/libs/snapshot"
)

// API is how the bridge talks to jetqueue: one HTTP call of API.md. Ingest
// serves it in-process with its own handler (see Handler).
type API interface {
	Do(ctx context.Context, method, path string, header http.Header, body []byte) (status int, answer []byte, err error)
}

// Handler serves API calls with an http.Handler, in-process.
func Handler(h http.Handler) API { return handlerAPI{h} }

type handlerAPI struct{ h http.Handler }

func (a handlerAPI) Do(ctx context.Context, method, path string, header http.Header, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), nil
}

// Client builds the bridge's clientset from a kubeconfig file, or from
// the pod's service account when path is empty.
func Client(path string) (kubernetes.Interface, error) {
	return kube.Client(path, "jetqueue-ingest-bridge")
}

// Config is what the bridge runs on.
type Config struct {
	Kube kubernetes.Interface
	API  API
	// JS reads JQ_EVENTS.
	JS  jetstream.JetStream
	Log *zap.Logger
	// SubmissionID returns the ce-id ingest gives the WorkloadSubmitted
	// event of a submission with this Idempotency-Key in this namespace.
	// The bridge tells its own workloads from others' by it: only its own
	// are deleted when their Job is gone.
	SubmissionID func(namespace, idempotencyKey string) string
	// Workers reconcile Jobs concurrently (one Job at a time each);
	// default 4.
	Workers int
	// Synced, when set, is called once the bridge starts reconciling.
	Synced func()
	// Skip is the services' rule for an event in the log that cannot be
	// applied (service.Runtime.Skip); nil logs it. RunLeading counts each
	// event once however often it replays the log.
	Skip func(seq uint64, typ string, err error)
	// Snapshot says when to snapshot the folded log to JQ_SNAPSHOTS
	// (SnapshotName); the zero policy never writes one (a snapshot found
	// is still restored). SnapshotMetrics counts them (nil: unexported).
	Snapshot        snapshot.Policy
	SnapshotMetrics *snapshot.Metrics
}

// Bridge is one running bridge.
type Bridge struct {
	cfg   Config
	log   *zap.Logger
	st    *state
	queue workqueue.TypedRateLimitingInterface[string]
	jobs  batchlisters.JobLister
	// record writes Events on Jobs.
	record record.EventRecorder

	mu sync.Mutex
	// done remembers the workload actions posted (finish, podsready,
	// delete) per Job and the workload or admission they were for, so
	// that the Job's update events do not post them again before their
	// events come back through the log; forgotten when the workload is
	// deleted.
	done map[action]string
	// submitted remembers, per Job, the Idempotency-Key of a submission
	// whose WorkloadSubmitted the follower has not read yet, so that the
	// Job's own update events do not submit it again meanwhile.
	submitted map[string]string
	// refused remembers, per Job, the submission jetqueue refused as
	// invalid (400), so that the Job's later updates do not post the same
	// body again (and record the same Warning again); an edit that changes
	// the body is submitted.
	refused map[string]string
}

// Run bridges until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Kube == nil || cfg.API == nil || cfg.JS == nil || cfg.SubmissionID == nil {
		return errors.New("bridge: Kube, API, JS and SubmissionID are required")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Skip == nil {
		log := cfg.Log
		cfg.Skip = func(seq uint64, typ string, err error) {
			log.Error("skipping an event that cannot be applied", zap.Uint64("seq", seq), zap.String("type", typ), zap.Error(err))
		}
	}
	b := &Bridge{cfg: cfg, log: cfg.Log.Named("kube-bridge"), st: newState(), done: map[action]string{}, submitted: map[string]string{},
		refused: map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "jetqueue-kube-bridge"})}
	defer b.queue.ShutDown()
	var stopRecording func()
	b.record, stopRecording = newRecorder(cfg.Kube)
	defer stopRecording()

	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = api.QueueNameLabel }))
	defer factory.Shutdown()
	inf := factory.Batch().V1().Jobs()
	b.jobs = inf.Lister()
	reg, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.enqueueJob,
		UpdateFunc: func(_, obj any) { b.enqueueJob(obj) },
		DeleteFunc: b.enqueueJob,
	})
	if err != nil {
		return fmt.Errorf("job informer: %w", err)
	}

	store, err := snapshot.Open(ctx, cfg.JS, snapshot.Options{Name: SnapshotName, Version: snapshotVersion, Log: b.log,
		Metrics: cfg.SnapshotMetrics})
	if err != nil {
		return err
	}
	snaps := &snapshot.Writer{Store: store, Policy: cfg.Snapshot}
	defer snaps.Wait()
	start := store.Restore(ctx, func(sn *snapshot.Snapshot) error {
		st, err := decodeState(sn)
		if err == nil {
			b.st = st
		}
		return err
	})
	snaps.Restored(start)

	fctx, stopFollower := context.WithCancel(ctx)
	defer stopFollower()
	caughtUp := make(chan struct{})
	followed := make(chan error, 1)
	go func() { followed <- b.follow(fctx, caughtUp, start, snaps) }()

	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}
	select {
	case <-caughtUp:
	case err := <-followed:
		return err
	case <-ctx.Done():
		return nil
	}
	// Everything either side knows, once: Jobs whose workload is gone and
	// workloads whose Job is gone included.
	jobs, err := b.jobs.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, j := range jobs {
		b.queue.Add(j.Namespace + "/" + j.Name)
	}
	for _, k := range b.st.keys() {
		b.queue.Add(k)
	}
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for b.next(ctx) {
			}
		})
	}
	b.log.Info("reconciling Jobs", zap.Int("jobs", len(jobs)))
	if cfg.Synced != nil {
		cfg.Synced()
	}
	select {
	case <-ctx.Done():
	case err = <-followed:
	}
	b.queue.ShutDown()
	wg.Wait()
	return err
}

func (b *Bridge) enqueueJob(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		b.queue.Add(key)
	}
}

// next reconciles one key; false once the queue shuts down.
func (b *Bridge) next(ctx context.Context) bool {
	key, quit := b.queue.Get()
	if quit {
		return false
	}
	defer b.queue.Done(key)
	if err := b.reconcile(ctx, key); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("reconcile failed; retrying", zap.String("job", key), zap.Error(err))
		}
		b.queue.AddRateLimited(key)
		return true
	}
	b.queue.Forget(key)
	return true
}

// follow folds JQ_EVENTS after start (the restored snapshot's sequence,
// 0 for the whole log), with an ordered consumer, into the state,
// queueing the Job of each workload event. It closes caughtUp once it has
// read what the stream held when it started, and snapshots the state
// when snaps says so, each time it has caught up.
func (b *Bridge) follow(ctx context.Context, caughtUp chan<- struct{}, start uint64, snaps *snapshot.Writer) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if start > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start + 1}
	}
	last := start
	cons, err := bus.NewReader(ctx, b.cfg.JS, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", events.Stream, err)
	}
	defer cons.Close()
	caught := false
	for ctx.Err() == nil {
		msgs, atEnd, err := bus.Follow(ctx, cons, 256, 200*time.Millisecond, last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow %s: %w", events.Stream, err)
		}
		for _, m := range msgs {
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			last = meta.Sequence.Stream
			ev, key, err := b.apply(meta.Sequence.Stream, m)
			if err != nil {
				b.cfg.Skip(meta.Sequence.Stream, m.Headers().Get(events.HeaderType), err)
				continue
			}
			if key != "" {
				switch ev.Type {
				case events.WorkloadSubmitted:
					b.mu.Lock()
					delete(b.submitted, key)
					b.mu.Unlock()
				case events.WorkloadDeleted, events.WorkloadExpired:
					b.mu.Lock()
					for _, verb := range verbs {
						delete(b.done, action{key, verb})
					}
					// A name taken is free again.
					delete(b.refused, key)
					b.mu.Unlock()
				}
				b.queue.Add(key)
			}
		}
		if !caught && atEnd {
			caught = true
			close(caughtUp)
		}
		if atEnd && snaps.Due(last) {
			payload, err := b.st.encode()
			if err != nil {
				snaps.Done(0, err)
				continue
			}
			at := last
			snaps.Start(func() (uint64, error) { return at, snaps.Store.Save(ctx, at, payload) })
		}
	}
	return nil
}

// apply decodes and folds one event; a panic is an error like any other
// event that cannot be applied.
func (b *Bridge) apply(seq uint64, m jetstream.Msg) (ev events.Event, key string, err error) {
	err = replay.Guard(func() error {
		if ev, err = bus.Decode(m); err != nil {
			return err
		}
		key, err = b.st.apply(seq, ev)
		return err
	})
	return ev, key, err
}

// jobOf is the Job the bridge manages under a key, nil if there is none.
func (b *Bridge) jobOf(namespace, name string) (*batchv1.Job, error) {
	job, err := b.jobs.Jobs(namespace).Get(name)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if !managed(job) {
		return nil, nil
	}
	return job, nil
}

// RunLeading runs the bridge only while this instance holds the lease, so
// that of several ingest instances exactly one acts on Jobs; a standby
// takes over within the lease's TTL, from the informer and the log like
// any restarted bridge.
func RunLeading(ctx context.Context, cfg Config, leader *bus.Leadership) error {
	defer leader.Release()
	if skip := cfg.Skip; skip != nil {
		// Each new term replays the log from its start, and the last
		// term's follower may still be reading.
		var mu sync.Mutex
		var through uint64
		cfg.Skip = func(seq uint64, typ string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if seq > through {
				through = seq
				skip(seq, typ, err)
			}
		}
	}
	for ctx.Err() == nil {
		leading, err := leader.Lead(ctx)
		if err != nil && !errors.Is(err, bus.ErrLeaseLost) {
			return err
		}
		if !leading {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			defer cancel()
			for {
				select {
				case <-rctx.Done():
					return
				case <-time.After(time.Second):
					if _, err := leader.Lead(rctx); err != nil {
						if cfg.Log != nil {
							cfg.Log.Warn("kube bridge: lease lost; standing by", zap.Error(err))
						}
						return
					}
				}
			}
		}()
		err = Run(rctx, cfg)
		lost := rctx.Err() != nil
		cancel()
		<-watched
		if err != nil && ctx.Err() == nil && !lost {
			return err
		}
	}
	return nil
}
