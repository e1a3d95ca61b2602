package engine

// The binary form of a snapshot's workloads. On a long history they are
// nearly all of a snapshot (every finished workload stays until it is
// deleted), and decoding them from JSON by reflection was nearly all of a
// restart: here each workload is a length-prefixed record of fixed
// fields, and the Kubernetes parts of it (ObjectMeta, each podSet's
// tolerations and node affinity) are in Kubernetes' own protobuf encoding, decoded by the
// generated code of k8s.io/api. Records are length-prefixed so that they
// are split first and decoded on every CPU.
//
// The record's fields are those of snapWorkload, in order; the scheduler
// types it holds (Reason, TriedFlavors) field by field, an admission (only
// workloads holding quota have one) as JSON. TestSnapshotCodecCoversEveryField
// fails when any of these types gains a field the codec does not write.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// errShort is a record that ends before its fields do.
var errShort = errors.New("record truncated")

type snapWriter struct {
	b []byte
	// adms holds each admission's encoding, by the record's pointer:
	// workloads admitted alike share one (EncodeSnapshot).
	adms map[*snapAdmission][]byte
	// keys is the buffer sorted writes a map's keys in.
	keys []string
}

// sorted returns m's keys in order, in a buffer the next call reuses.
func sorted[K ~string, V any](w *snapWriter, m map[K]V) []string {
	w.keys = w.keys[:0]
	for k := range m {
		w.keys = append(w.keys, string(k))
	}
	slices.Sort(w.keys)
	return w.keys
}

func (w *snapWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *snapWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *snapWriter) bytes(p []byte)   { w.uvarint(uint64(len(p))); w.b = append(w.b, p...) }
func (w *snapWriter) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }

func (w *snapWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time keeps the instant and the zone offset, as the JSON form did.
func (w *snapWriter) time(t time.Time) error {
	p, err := t.MarshalBinary()
	if err != nil {
		return err
	}
	w.bytes(p)
	return nil
}

// optInt32 writes a presence byte, then the value.
func (w *snapWriter) optInt32(p *int32) {
	w.bool(p != nil)
	if p != nil {
		w.varint(int64(*p))
	}
}

// proto writes a Kubernetes object in its protobuf encoding.
func (w *snapWriter) proto(m interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}) error {
	n := m.Size()
	w.uvarint(uint64(n))
	start := len(w.b)
	w.b = append(w.b, make([]byte, n)...)
	if _, err := m.MarshalToSizedBuffer(w.b[start:]); err != nil {
		return err
	}
	return nil
}

type snapReader struct {
	b   []byte
	err error
	// adms holds each admission decoded, by its encoding: workloads
	// admitted alike share one (decodeWorkloads). What it holds is read
	// only.
	adms map[string]*snapAdmission
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *snapReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("%d out of int32", v))
		return 0
	}
	return int32(v)
}

func (r *snapReader) int() int {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("%d out of range", v))
		return 0
	}
	return int(v)
}

func (r *snapReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *snapReader) str() string { return string(r.bytes()) }

func (r *snapReader) bool() bool {
	if len(r.b) == 0 {
		r.fail(errShort)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		r.fail(fmt.Errorf("bool %d", v))
	}
	return v == 1
}

func (r *snapReader) time() time.Time {
	var t time.Time
	if p := r.bytes(); r.err == nil {
		if err := t.UnmarshalBinary(p); err != nil {
			r.fail(err)
		}
	}
	return t
}

func (r *snapReader) optInt32() *int32 {
	if !r.bool() {
		return nil
	}
	v := r.int32()
	return &v
}

// count reads a number of elements that each take at least one byte, so
// that a hostile count cannot make a huge allocation.
func (r *snapReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%d elements in %d bytes", n, len(r.b)))
		return 0
	}
	return int(n)
}

func (r *snapReader) proto(m interface{ Unmarshal([]byte) error }) {
	if p := r.bytes(); r.err == nil {
		if err := m.Unmarshal(p); err != nil {
			r.fail(err)
		}
	}
}

func (w *snapWriter) object(o *api.Workload) error {
	w.str(o.APIVersion)
	w.str(o.Kind)
	if err := w.proto(&o.ObjectMeta); err != nil {
		return err
	}
	s := &o.Spec
	w.str(s.QueueName)
	w.str(s.PriorityClassName)
	w.optInt32(s.Priority)
	w.str(s.PriorityClassSource)
	w.bool(s.Active != nil)
	if s.Active != nil {
		w.bool(*s.Active)
	}
	if s.PodSets != nil {
		// The engine keeps none (see withoutTemplates): what it read of
		// them is written by podSets.
		return fmt.Errorf("an object with its podSets")
	}
	return nil
}

// podSets writes the scheduler's view of a workload's podSets, which is
// all a restore needs of their templates. nil and empty maps and lists
// are told apart, as the engine built them.
func (w *snapWriter) podSets(pss []scheduler.PodSet) error {
	w.bool(pss != nil)
	w.uvarint(uint64(len(pss)))
	for i := range pss {
		ps := &pss[i]
		w.str(ps.Name)
		w.varint(int64(ps.Count))
		w.optInt32(ps.MinCount)
		w.bool(ps.PerPod != nil)
		w.uvarint(uint64(len(ps.PerPod)))
		for _, r := range sorted(w, ps.PerPod) {
			w.str(r)
			w.varint(ps.PerPod[corev1.ResourceName(r)])
		}
		w.bool(ps.NodeSelector != nil)
		w.uvarint(uint64(len(ps.NodeSelector)))
		for _, k := range sorted(w, ps.NodeSelector) {
			w.str(k)
			w.str(ps.NodeSelector[k])
		}
		w.bool(ps.Affinity != nil)
		if ps.Affinity != nil {
			if err := w.proto(ps.Affinity); err != nil {
				return err
			}
		}
		w.bool(ps.Tolerations != nil)
		w.uvarint(uint64(len(ps.Tolerations)))
		for j := range ps.Tolerations {
			if err := w.proto(&ps.Tolerations[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *snapReader) podSets() []scheduler.PodSet {
	some := r.bool()
	n := r.count()
	if !some {
		return nil
	}
	pss := make([]scheduler.PodSet, n)
	for i := range pss {
		ps := &pss[i]
		ps.Name = r.str()
		ps.Count = r.int32()
		ps.MinCount = r.optInt32()
		if ps.Count < 0 || ps.MinCount != nil && *ps.MinCount < 0 {
			r.fail(fmt.Errorf("podSet %q: a negative count", ps.Name))
			return nil
		}
		some := r.bool()
		if n := r.count(); some {
			ps.PerPod = make(map[corev1.ResourceName]int64, n)
			for range n {
				k := corev1.ResourceName(r.str())
				// A negative request would free quota that is not free.
				if v := r.varint(); v >= 0 {
					ps.PerPod[k] = v
				} else {
					r.fail(fmt.Errorf("podSet %q: %s request %d", ps.Name, k, v))
					return nil
				}
			}
		}
		some = r.bool()
		if n := r.count(); some {
			ps.NodeSelector = make(map[string]string, n)
			for range n {
				k := r.str()
				ps.NodeSelector[k] = r.str()
			}
		}
		if r.bool() {
			ps.Affinity = &corev1.NodeSelector{}
			r.proto(ps.Affinity)
		}
		some = r.bool()
		if n := r.count(); some {
			ps.Tolerations = make([]corev1.Toleration, n)
			for j := range ps.Tolerations {
				r.proto(&ps.Tolerations[j])
			}
		}
		if r.err != nil {
			return nil
		}
	}
	return pss
}

func (r *snapReader) object() *api.Workload {
	o := &api.Workload{TypeMeta: metav1.TypeMeta{APIVersion: r.str(), Kind: r.str()}}
	r.proto(&o.ObjectMeta)
	s := &o.Spec
	s.QueueName = r.str()
	s.PriorityClassName = r.str()
	s.Priority = r.optInt32()
	s.PriorityClassSource = r.str()
	if r.bool() {
		v := r.bool()
		s.Active = &v
	}
	return o
}

func (w *snapWriter) reason(x *scheduler.Reason) {
	w.bool(x != nil)
	if x == nil {
		return
	}
	w.str(x.Token)
	w.str(x.PodSet)
	w.str(x.Resource)
	w.str(x.Flavor)
	w.str(x.Cohort)
	w.varint(x.Shortfall)
	w.str(x.Message)
}

func (r *snapReader) reason() *scheduler.Reason {
	if !r.bool() {
		return nil
	}
	return &scheduler.Reason{Token: r.str(), PodSet: r.str(), Resource: r.str(), Flavor: r.str(), Cohort: r.str(),
		Shortfall: r.varint(), Message: r.str()}
}

func (w *snapWriter) tried(t *scheduler.TriedFlavors) {
	w.bool(t != nil)
	if t == nil {
		return
	}
	w.bool(t.Index != nil)
	w.uvarint(uint64(len(t.Index)))
	for _, m := range t.Index {
		w.bool(m != nil)
		keys := sorted(w, m)
		w.uvarint(uint64(len(keys)))
		for _, k := range keys {
			w.str(k)
			w.varint(int64(m[corev1.ResourceName(k)]))
		}
	}
	w.varint(t.ClusterQueueGen)
	w.varint(t.CohortGen)
}

func (r *snapReader) tried() *scheduler.TriedFlavors {
	if !r.bool() {
		return nil
	}
	t := &scheduler.TriedFlavors{}
	some := r.bool()
	if n := r.count(); some {
		t.Index = make([]map[corev1.ResourceName]int, n)
	}
	for i := range t.Index {
		some := r.bool()
		n := r.count()
		if some {
			t.Index[i] = make(map[corev1.ResourceName]int, n)
		}
		for range n {
			k := corev1.ResourceName(r.str())
			v := r.int()
			if r.err != nil {
				return nil
			}
			if t.Index[i] == nil {
				r.fail(fmt.Errorf("entries in a nil map"))
				return nil
			}
			t.Index[i][k] = v
		}
	}
	t.ClusterQueueGen = r.varint()
	t.CohortGen = r.varint()
	return t
}

// encodeWorkload appends one workload's record, without its length.
func (w *snapWriter) workload(sw *snapWorkload) error {
	if err := w.object(sw.Object); err != nil {
		return err
	}
	if err := w.podSets(sw.PodSets); err != nil {
		return err
	}
	w.str(sw.Misconfigured)
	w.bool(sw.Adjusted)
	if err := w.time(sw.Created); err != nil {
		return err
	}
	if err := w.time(sw.QueueTime); err != nil {
		return err
	}
	w.str(sw.ClusterQueue)
	w.varint(int64(sw.Priority))
	w.tried(sw.LastTried)
	w.str(string(sw.Status))
	var adm []byte
	if sw.Admission != nil {
		var ok bool
		if adm, ok = w.adms[sw.Admission]; !ok {
			var err error
			if adm, err = json.Marshal(sw.Admission); err != nil {
				return err
			}
			if w.adms == nil {
				w.adms = map[*snapAdmission][]byte{}
			}
			w.adms[sw.Admission] = adm
		}
	}
	w.bytes(adm)
	if err := w.time(sw.AdmittedAt); err != nil {
		return err
	}
	w.uvarint(sw.AdmissionSeq)
	w.reason(sw.Reason)
	w.varint(int64(sw.Evictions))
	w.bool(sw.PodsReady)
	w.varint(int64(sw.RequeueCount))
	if err := w.time(sw.RequeueAt); err != nil {
		return err
	}
	w.str(sw.QueuedIn)
	w.str(sw.FinishedIn)
	w.reason(sw.PublishedReason)
	w.bool(sw.CondPending)
	w.bool(sw.Listed)
	w.optInt32(sw.EvictedPriority)
	w.bool(sw.BackoffUpdated)
	w.bool(sw.EvictedUnset)
	w.bool(sw.TimedOut)
	w.uvarint(sw.TimerSeq)
	w.bool(sw.FinishedQueued)
	return nil
}

// workload decodes one record into sw.
func (r *snapReader) workload(sw *snapWorkload) error {
	sw.Object = r.object()
	sw.PodSets = r.podSets()
	sw.Misconfigured = r.str()
	sw.Adjusted = r.bool()
	sw.Created = r.time()
	sw.QueueTime = r.time()
	sw.ClusterQueue = r.str()
	sw.Priority = r.int32()
	sw.LastTried = r.tried()
	sw.Status = Status(r.str())
	if adm := r.bytes(); len(adm) > 0 && r.err == nil {
		if sw.Admission = r.adms[string(adm)]; sw.Admission == nil {
			sw.Admission = &snapAdmission{}
			if err := json.Unmarshal(adm, sw.Admission); err != nil {
				r.fail(fmt.Errorf("admission: %w", err))
			} else if r.adms != nil {
				r.adms[string(adm)] = sw.Admission
			}
		}
	}
	sw.AdmittedAt = r.time()
	sw.AdmissionSeq = r.uvarint()
	sw.Reason = r.reason()
	sw.Evictions = r.int()
	sw.PodsReady = r.bool()
	sw.RequeueCount = r.int32()
	sw.RequeueAt = r.time()
	sw.QueuedIn = r.str()
	sw.FinishedIn = r.str()
	sw.PublishedReason = r.reason()
	sw.CondPending = r.bool()
	sw.Listed = r.bool()
	sw.EvictedPriority = r.optInt32()
	sw.BackoffUpdated = r.bool()
	sw.EvictedUnset = r.bool()
	sw.TimedOut = r.bool()
	sw.TimerSeq = r.uvarint()
	sw.FinishedQueued = r.bool()
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after the record", len(r.b)))
	}
	return r.err
}
