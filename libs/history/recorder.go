package history

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/replay"
)

// Recorder writes a log as jetqueue's services would: each request is an
// event, and Settle runs the deciding engine to quiescence and records its
// decisions (admissions, reasons, preemptions and the preemptor's
// evictions) with their owners' sources. It is the in-process stand-in for
// a recorded run, for tests and tools; it does no I/O.
type Recorder struct {
	Eng *engine.Engine
	Log []Record
	// Admitted are the workloads the last Settle admitted, in order.
	Admitted []string
	seq      uint64
	next     int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	e := engine.New()
	e.RecordDecisions()
	return &Recorder{Eng: e}
}

func (r *Recorder) add(typ events.Type, source, subject string, at time.Time, data any) {
	r.next++
	r.addID(fmt.Sprintf("rec-%d", r.next), typ, source, subject, at, data)
}

func (r *Recorder) addID(id string, typ events.Type, source, subject string, at time.Time, data any) {
	r.seq++
	r.Log = append(r.Log, Record{Seq: r.seq, Event: events.Event{ID: id, Type: typ,
		Source: source, Time: at, Subject: subject, Data: data}})
}

// Apply records and applies a validated configuration object.
func (r *Recorder) Apply(obj api.Object, at time.Time) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if _, err := r.Eng.Apply(obj, at); err != nil {
		return err
	}
	ref := events.ConfigRef{Kind: obj.GetObjectKind().GroupVersionKind().Kind}
	if m, err := meta.Accessor(obj); err == nil {
		ref.Namespace, ref.Name = m.GetNamespace(), m.GetName()
	}
	r.add(events.ConfigApplied, events.SourceIngest, events.ConfigSubject(ref.Kind, ref.Namespace, ref.Name), at,
		&events.ConfigAppliedData{ConfigRef: ref, Object: raw})
	return nil
}

// Submit records and submits a validated workload created at at.
func (r *Recorder) Submit(wl *api.Workload, at time.Time) error {
	raw, err := json.Marshal(wl)
	if err != nil {
		return err
	}
	if _, err := r.Eng.Submit(wl.DeepCopy(), at); err != nil {
		return err
	}
	ref := events.WorkloadRef{Namespace: wl.Namespace, Name: wl.Name}
	r.add(events.WorkloadSubmitted, events.SourceIngest, events.WorkloadSubject(ref.Namespace, ref.Name), at,
		&events.WorkloadSubmittedData{WorkloadRef: ref, Workload: raw, CreatedAt: at})
	return nil
}

func split(key string) events.WorkloadRef {
	for i := range len(key) {
		if key[i] == '/' {
			return events.WorkloadRef{Namespace: key[:i], Name: key[i+1:]}
		}
	}
	return events.WorkloadRef{Name: key}
}

// Finish records a workload's finish.
func (r *Recorder) Finish(key string, at time.Time) error {
	if err := r.Eng.Finish(key, at); err != nil {
		return err
	}
	ref := split(key)
	r.add(events.WorkloadFinished, events.SourceIngest, events.WorkloadSubject(ref.Namespace, ref.Name), at,
		&events.WorkloadFinishedData{WorkloadRef: ref, Succeeded: true})
	return nil
}

// Expire records retention's expiry of a finished workload: every
// decider forgets it, and its name is free again.
func (r *Recorder) Expire(key string, at time.Time) error {
	if w := r.Eng.Workload(key); w == nil || w.Status != engine.Finished {
		return fmt.Errorf("workload %s: not finished", key)
	}
	if err := r.Eng.Delete(key, at); err != nil {
		return err
	}
	ref := split(key)
	r.add(events.WorkloadExpired, events.SourceRetention, events.WorkloadSubject(ref.Namespace, ref.Name), at, &ref)
	return nil
}

// SetPriority records a priority change.
func (r *Recorder) SetPriority(key string, p int32, at time.Time) error {
	if err := r.Eng.SetPriority(key, p, at); err != nil {
		return err
	}
	ref := split(key)
	r.add(events.PriorityChanged, events.SourceIngest, events.WorkloadSubject(ref.Namespace, ref.Name), at,
		&events.PriorityChangedData{WorkloadRef: ref, Priority: p})
	return nil
}

// PodsReady records that an admitted workload's pods are ready.
func (r *Recorder) PodsReady(key string, at time.Time) error {
	if err := r.Eng.PodsReady(key); err != nil {
		return err
	}
	ref := split(key)
	r.add(events.PodsReady, events.SourceIngest, events.WorkloadSubject(ref.Namespace, ref.Name), at, &ref)
	return nil
}

// Settle runs the engine to rest at at (as admission does) and records its decisions,
// each named, as admission names its own, by the log position it was
// decided at (events.DecisionID).
func (r *Recorder) Settle(at time.Time) {
	r.Eng.RunToRest(at)
	r.Admitted = r.Admitted[:0]
	pos := r.seq
	for i, d := range r.Eng.DrainDecisions() {
		ref := split(d.Key)
		subj := events.WorkloadSubject(ref.Namespace, ref.Name)
		decided := func(typ events.Type, data any) {
			r.addID(events.DecisionID("admission", pos, i), typ, events.SourceAdmission, subj, at, data)
		}
		switch d.Kind {
		case engine.DecidedAdmission:
			r.Admitted = append(r.Admitted, d.Key)
			decided(events.QuotaReserved, &events.QuotaReservedData{WorkloadRef: ref, Admission: *d.Admission})
		case engine.DecidedInadmissible:
			decided(events.Inadmissible, &events.InadmissibleData{WorkloadRef: ref, Reason: *d.Reason})
		case engine.DecidedPreemption:
			data := &events.PreemptionRequestedData{WorkloadRef: ref, ClusterQueue: r.Eng.Workload(d.Key).Info.ClusterQueue}
			for _, t := range d.Targets {
				data.Victims = append(data.Victims, events.Victim{WorkloadRef: split(t.Workload.Key), Kind: t.Kind})
			}
			decided(events.PreemptionRequested, data)
			req := r.Log[len(r.Log)-1].Event
			for _, ev := range replay.Evictions(req, data) {
				r.add(ev.Type, ev.Source, ev.Subject, at, ev.Data)
			}
		case engine.DecidedEviction:
			decided(events.Evicted, &events.EvictedData{WorkloadRef: ref, Reason: d.EvictionReason})
		}
	}
	r.Eng.DrainEvictions()
}

// FireTimers fires the engine's timers due at or before at, as the
// podsready service does, and records what it publishes: a PodsReady
// timeout's eviction, a deactivation, the end of a backoff. Callers fire
// each timer at its own instant (NextTimer).
func (r *Recorder) FireTimers(at time.Time) {
	for _, t := range r.Eng.DueTimers(at) {
		ref := split(t.Key)
		subj := events.WorkloadSubject(ref.Namespace, ref.Name)
		switch {
		case t.Timeout == nil:
			r.add(events.Requeued, events.SourcePodsReady, subj, at, &events.RequeuedData{WorkloadRef: ref, Count: t.RequeueCount, Until: t.At})
		case t.Timeout.Deactivate:
			r.add(events.Evicted, events.SourcePodsReady, subj, at, &events.EvictedData{WorkloadRef: ref, Reason: engine.EvictedByDeactivation})
			r.add(events.Deactivated, events.SourcePodsReady, subj, at, &ref)
		default:
			until := t.Timeout.RequeueAt
			r.add(events.Evicted, events.SourcePodsReady, subj, at, &events.EvictedData{WorkloadRef: ref,
				Reason: engine.EvictedByPodsReadyTimeout, RequeueCount: t.Timeout.Count, RequeueAt: &until})
		}
	}
	r.Eng.FireTimers(at)
	r.Eng.DrainEvictions()
}
