package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/status"
)

// Record accounts for stream sequences: the event at Seq, or, with
// Parked set, the event at Seq stored aside, or, with Gone > 0, the Gone
// sequences from Seq on that the stream no longer holds (expired by its
// limits, or deleted). Apply takes a Gone span on the caller's word: the
// projector passes one only once the stream has confirmed it. Raw, if
// set, is the event's payload as the stream holds it, which history
// stores as it is instead of encoding Event.Data again.
type Record struct {
	Seq    uint64
	Event  events.Event
	Raw    []byte
	Parked *Parked
	Gone   uint64
}

// Statuses of the workloads table.
const (
	StatusPending  = "pending"
	StatusAdmitted = "admitted"
	StatusFinished = "finished"
	StatusInactive = "inactive"
)

type workloadRow struct {
	Namespace, Name, UID, LocalQueue, ClusterQueue string
	Priority                                       int32
	Status                                         string
	Admission                                      *scheduler.Admission
	Reason, Message                                string
	ReasonDetail                                   *scheduler.Reason
	PodsReady                                      bool
	RequeueAt, AdmittedAt                          *time.Time
	CreatedAt                                      time.Time
	// QueueTime orders it in its queue when not CreatedAt (nil): the
	// eviction time after a PodsReady timeout, with timestamp Eviction.
	QueueTime *time.Time
	Evictions int32
	LastSeq   int64
	// Object is the submitted Workload; Kueue its status as Kueue
	// writes it.
	Object  json.RawMessage
	Kueue   status.Workload
	deleted bool
}

type key struct{ ns, name string }

// batch is the effect of a run of events, folded in memory and written in
// one transaction.
type batch struct {
	rows    map[key]*workloadRow
	history [][]any
	usageCQ map[quota.FlavorResource]map[string]int64
	configs map[[3]string]*configChange
	lqs     map[key]string
	parked  [][]any
	// byEviction is the Configuration's requeuingStrategy: a PodsReady
	// timeout requeues by eviction time (the default) or creation time.
	byEviction bool
	// waitForPodsReady is whether the Configuration enables it: only then
	// does a workload's status carry the PodsReady condition.
	waitForPodsReady bool
}

type configChange struct {
	object  json.RawMessage // nil: deleted
	lastSeq uint64
	time    time.Time
}

// Apply projects a batch of records in one transaction and stores the
// new last sequence in it. The batch must continue the projection: its
// records, after any prefix the projection already holds (dropped, so a
// retried batch changes nothing), must start at last_seq+1 and account for
// every sequence up to their end; otherwise Apply refuses it with a
// *SequenceError and writes nothing. A record whose content cannot be
// stored fails the batch with an error for which Unstorable is true: the
// caller finds it (smaller batches) and passes it again as Parked. It
// returns how many records were applied.
func (s *Store) Apply(ctx context.Context, recs []Record) (int, error) {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin projection batch: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var last int64
	if err := tx.QueryRow(ctx, `SELECT last_seq FROM projection_state FOR UPDATE`).Scan(&last); err != nil {
		return 0, fmt.Errorf("read the projection's position: %w", err)
	}
	todo, err := pending(uint64(last), recs)
	if err != nil || len(todo) == 0 {
		return 0, err
	}
	b, err := load(ctx, tx, todo)
	if err != nil {
		return 0, fmt.Errorf("load the batch's workloads: %w", err)
	}
	for _, r := range todo {
		if err := b.add(r); err != nil {
			return 0, fmt.Errorf("event %d (%s): %w: %w", r.Seq, r.Event.Type, ErrUnstorable, err)
		}
	}
	if err := b.write(ctx, tx); err != nil {
		return 0, err
	}
	end := int64(todo[len(todo)-1].end())
	if _, err := tx.Exec(ctx, `UPDATE projection_state SET last_seq = $1`, end); err != nil {
		return 0, fmt.Errorf("store the projection's position: %w", err)
	}
	// Delivered at commit only: the watchers' push (see Progress).
	if _, err := tx.Exec(ctx, notifyProgress, strconv.FormatInt(end, 10)); err != nil {
		return 0, fmt.Errorf("notify the projection's position: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit projection batch: %w", err)
	}
	return len(todo), nil
}

// add folds an event record into the batch, or sets a parked one aside;
// a gone span has nothing to add.
func (b *batch) add(r Record) error {
	switch {
	case r.Gone > 0:
		return nil
	case r.Parked != nil:
		p := r.Parked
		b.parked = append(b.parked, []any{int64(r.Seq), clean(p.Type), clean(p.Subject), clean(p.Reason), p.Data})
		return nil
	}
	return b.fold(r)
}

// byKeys runs a statement over a batch's keys (unnest of its arrays) as
// an unnamed statement, which PostgreSQL plans for its arguments and the
// table as it is at each run. Prepared and cached, it would get a generic
// plan after five runs, and one made while the table was nearly empty
// scans the whole table for every batch from then on
// (TestProjectionLooksUpWorkloadsByKeyAsTheTableGrows).
const byKeys = pgx.QueryExecModeExec

// load reads the current rows of every workload the records touch, and the
// LocalQueues that route submissions to ClusterQueues.
func load(ctx context.Context, tx pgx.Tx, recs []Record) (*batch, error) {
	b := &batch{rows: map[key]*workloadRow{}, usageCQ: map[quota.FlavorResource]map[string]int64{},
		configs: map[[3]string]*configChange{}, lqs: map[key]string{}}
	var nss, names []string
	seen := map[key]bool{}
	for _, r := range recs {
		if r.Gone > 0 || r.Parked != nil {
			continue
		}
		if ref, ok := workloadRef(r.Event); ok && !seen[key{ref.Namespace, ref.Name}] {
			seen[key{ref.Namespace, ref.Name}] = true
			nss, names = append(nss, ref.Namespace), append(names, ref.Name)
		}
	}
	rows, err := tx.Query(ctx, `
		SELECT namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
		       reason_detail, pods_ready, requeue_at, created_at, admitted_at, evictions, last_seq, queue_time, object, kueue_status
		FROM workloads WHERE (namespace, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, byKeys, nss, names)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var w workloadRow
		var adm, kst []byte
		if err := rows.Scan(&w.Namespace, &w.Name, &w.UID, &w.LocalQueue, &w.ClusterQueue, &w.Priority, &w.Status, &adm,
			&w.Reason, &w.Message, &w.ReasonDetail, &w.PodsReady, &w.RequeueAt, &w.CreatedAt, &w.AdmittedAt, &w.Evictions, &w.LastSeq,
			&w.QueueTime, &w.Object, &kst); err != nil {
			rows.Close()
			return nil, err
		}
		if len(kst) > 0 {
			if err := json.Unmarshal(kst, &w.Kueue); err != nil {
				rows.Close()
				return nil, err
			}
		}
		if len(adm) > 0 {
			w.Admission = new(scheduler.Admission)
			if err := json.Unmarshal(adm, w.Admission); err != nil {
				rows.Close()
				return nil, err
			}
		}
		b.rows[key{w.Namespace, w.Name}] = &w
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var conf []byte
	err = tx.QueryRow(ctx, `SELECT object FROM config_objects WHERE kind = $1`, api.KindConfiguration).Scan(&conf)
	if err != nil && err != pgx.ErrNoRows {
		return nil, err
	}
	if b.byEviction, b.waitForPodsReady, err = podsReadyConfig(conf); err != nil {
		return nil, err
	}
	lqRows, err := tx.Query(ctx, `SELECT namespace, name, object->'spec'->>'clusterQueue' FROM config_objects WHERE kind = 'LocalQueue'`)
	if err != nil {
		return nil, err
	}
	defer lqRows.Close()
	for lqRows.Next() {
		var ns, name string
		var cq *string
		if err := lqRows.Scan(&ns, &name, &cq); err != nil {
			return nil, err
		}
		if cq != nil {
			b.lqs[key{ns, name}] = *cq
		}
	}
	return b, lqRows.Err()
}

// workloadRef finds the workload an event is about.
func workloadRef(ev events.Event) (events.WorkloadRef, bool) {
	switch d := ev.Data.(type) {
	case *events.WorkloadRef:
		return *d, true
	case *events.WorkloadSubmittedData:
		return d.WorkloadRef, true
	case *events.PriorityChangedData:
		return d.WorkloadRef, true
	case *events.ActiveChangedData:
		return d.WorkloadRef, true
	case *events.WorkloadFinishedData:
		return d.WorkloadRef, true
	case *events.QuotaReservedData:
		return d.WorkloadRef, true
	case *events.InadmissibleData:
		return d.WorkloadRef, true
	case *events.PreemptionRequestedData:
		return d.WorkloadRef, true
	case *events.EvictedData:
		return d.WorkloadRef, true
	case *events.RequeuedData:
		return d.WorkloadRef, true
	case *events.PlacedData:
		return d.WorkloadRef, true
	}
	return events.WorkloadRef{}, false
}

// fold applies one event to the in-memory batch.
func (b *batch) fold(r Record) error {
	ev := r.Event
	switch d := ev.Data.(type) {
	case *events.ConfigAppliedData:
		b.configs[[3]string{d.Kind, d.Namespace, d.Name}] = &configChange{object: d.Object, lastSeq: r.Seq, time: ev.Time}
		if d.Kind == api.KindLocalQueue {
			var lq api.LocalQueue
			if err := json.Unmarshal(d.Object, &lq); err != nil {
				return err
			}
			b.lqs[key{d.Namespace, d.Name}] = lq.Spec.ClusterQueue
		}
		if d.Kind == api.KindConfiguration {
			var err error
			if b.byEviction, b.waitForPodsReady, err = podsReadyConfig(d.Object); err != nil {
				return err
			}
		}
		return nil
	case *events.ConfigRef:
		if d.Kind == api.KindConfiguration {
			b.byEviction, b.waitForPodsReady = true, false
		}
		b.configs[[3]string{d.Kind, d.Namespace, d.Name}] = &configChange{lastSeq: r.Seq}
		if d.Kind == api.KindLocalQueue {
			delete(b.lqs, key{d.Namespace, d.Name})
		}
		return nil
	case *events.BatchSkippedData, *events.BatchClosedData:
		// Bookkeeping for batch consumers; no workload changes.
		return nil
	}
	ref, ok := workloadRef(ev)
	if !ok {
		return fmt.Errorf("unhandled payload %T", ev.Data)
	}
	body := r.Raw
	if body == nil {
		var err error
		if body, err = ev.Body(); err != nil {
			return err
		}
	}
	b.history = append(b.history, []any{int64(r.Seq), ref.Namespace, ref.Name, string(ev.Type), ev.Time, body})
	k := key{ref.Namespace, ref.Name}
	w := b.rows[k]
	if ev.Type == events.WorkloadSubmitted {
		d := ev.Data.(*events.WorkloadSubmittedData)
		wl, err := api.DecodeStored(d.Workload)
		if err != nil {
			return err
		}
		w = &workloadRow{Namespace: ref.Namespace, Name: ref.Name, UID: string(wl.UID), LocalQueue: wl.Spec.QueueName,
			ClusterQueue: b.lqs[key{ref.Namespace, wl.Spec.QueueName}], Priority: api.WorkloadPriority(wl),
			Status: StatusPending, CreatedAt: d.CreatedAt, Object: d.Workload}
		if wl.Spec.Active != nil && !*wl.Spec.Active {
			w.Status = StatusInactive
		}
		b.rows[k] = w
	}
	if w == nil || w.deleted {
		// An event about a workload the projection does not hold (its
		// submission predates a retention cut, or it was deleted): history
		// keeps it, state has nothing to change.
		return nil
	}
	w.LastSeq = int64(r.Seq)
	w.Kueue.Apply(ev, b.waitForPodsReady)
	if ev.Type == events.WorkloadSubmitted && w.Status == StatusInactive {
		w.Kueue.Deactivated(ev.Time)
	}
	switch d := ev.Data.(type) {
	case *events.PriorityChangedData:
		w.Priority = d.Priority
	case *events.ActiveChangedData:
		switch {
		case !d.Active && (w.Status == StatusPending || w.Status == StatusAdmitted):
			if w.Status == StatusAdmitted {
				w.Evictions++
			}
			b.release(w)
			w.Status, w.Reason, w.Message, w.ReasonDetail, w.RequeueAt = StatusInactive, "", "", nil, nil
		case d.Active && w.Status == StatusInactive:
			w.Status, w.RequeueAt = StatusPending, nil
		}
	case *events.QuotaReservedData:
		adm := d.Admission
		w.Status, w.Admission, w.ClusterQueue, w.Reason, w.Message, w.ReasonDetail = StatusAdmitted, &adm, adm.ClusterQueue, "", "", nil
		t := ev.Time
		w.AdmittedAt, w.PodsReady, w.RequeueAt = &t, false, nil
		b.addUsage(&adm, 1)
	case *events.InadmissibleData:
		r := d.Reason
		w.Reason, w.Message, w.ReasonDetail = r.Token, r.Message, &r
	case *events.EvictedData:
		if w.Status == StatusInactive || w.Status == StatusFinished {
			// Kueue's scheduler admitted an inactive workload (finished
			// or not) that its LocalQueue, created after it, listed; the
			// workload controller evicted it at once. The log never held
			// that quota, and it stays as it was.
			break
		}
		b.release(w)
		w.Status, w.Evictions = StatusPending, w.Evictions+1
		w.Reason, w.Message, w.ReasonDetail = d.Reason, "", nil
		w.RequeueAt = d.RequeueAt
		// As the engine requeues it: by eviction time after a PodsReady
		// timeout with timestamp Eviction, else by creation time.
		w.QueueTime = nil
		if d.Reason == engine.EvictedByPodsReadyTimeout && b.byEviction {
			t := ev.Time
			w.QueueTime = &t
		}
	case *events.RequeuedData:
		// The backoff is over: the workload is back in its queue.
		w.RequeueAt = nil
	case *events.WorkloadFinishedData:
		// Kueue releases a finished workload's quota but leaves its
		// status.admission as it was: the job reconciler only adds the
		// Finished condition (jobframework reconciler.go, and the
		// workload controller returns early for a finished workload).
		adm := w.Admission
		b.release(w)
		if w.Status == StatusAdmitted {
			w.Admission = adm
		}
		w.Status = StatusFinished
	}
	switch ev.Type {
	case events.WorkloadDeleted:
		b.release(w)
		w.deleted = true
	case events.PodsReady:
		if w.Status == StatusAdmitted {
			w.PodsReady = true
		}
	case events.Deactivated:
		b.release(w)
		w.Status = StatusInactive
	}
	return nil
}

func (b *batch) release(w *workloadRow) {
	if w.Status == StatusAdmitted && w.Admission != nil {
		b.addUsage(w.Admission, -1)
	}
	w.Admission, w.AdmittedAt, w.PodsReady = nil, nil, false
}

func (b *batch) addUsage(a *scheduler.Admission, sign int64) {
	for _, ps := range a.PodSets {
		for r, f := range ps.Flavors {
			fr := quota.FlavorResource{Flavor: f, Resource: r}
			if b.usageCQ[fr] == nil {
				b.usageCQ[fr] = map[string]int64{}
			}
			b.usageCQ[fr][a.ClusterQueue] += sign * ps.Usage[r]
		}
	}
}

// write stores the batch: history by COPY, workload rows by COPY into a
// staging table merged with one INSERT … ON CONFLICT, usage as deltas.
func (b *batch) write(ctx context.Context, tx pgx.Tx) error {
	if len(b.parked) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"parked_events"},
			[]string{"seq", "type", "subject", "reason", "data"}, pgx.CopyFromRows(b.parked)); err != nil {
			return fmt.Errorf("copy parked events: %w", err)
		}
	}
	if len(b.history) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"workload_events"},
			[]string{"seq", "namespace", "name", "type", "time", "data"}, pgx.CopyFromRows(b.history)); err != nil {
			return fmt.Errorf("copy history: %w", err)
		}
	}
	var upserts [][]any
	var delNS, delNames []string
	for _, w := range b.rows {
		if w.deleted {
			delNS, delNames = append(delNS, w.Namespace), append(delNames, w.Name)
			continue
		}
		var adm []byte
		if w.Admission != nil {
			var err error
			if adm, err = json.Marshal(w.Admission); err != nil {
				return err
			}
		}
		var detail []byte
		if w.ReasonDetail != nil {
			detail, _ = json.Marshal(w.ReasonDetail)
		}
		kst, err := json.Marshal(w.Kueue)
		if err != nil {
			return err
		}
		var object []byte
		if len(w.Object) > 0 {
			object = w.Object
		}
		upserts = append(upserts, []any{w.Namespace, w.Name, w.UID, w.LocalQueue, w.ClusterQueue, w.Priority, w.Status, adm,
			w.Reason, w.Message, w.PodsReady, w.RequeueAt, w.CreatedAt, w.AdmittedAt, w.Evictions, w.LastSeq, detail, w.QueueTime, object, kst})
	}
	if len(upserts) > 0 {
		// Made once per connection and emptied by every commit: creating
		// and dropping a table in each batch cost PostgreSQL more than the
		// batch's own rows.
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS staging_workloads (LIKE workloads) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		cols := []string{"namespace", "name", "uid", "local_queue", "cluster_queue", "priority", "status", "admission",
			"reason", "message", "pods_ready", "requeue_at", "created_at", "admitted_at", "evictions", "last_seq", "reason_detail", "queue_time",
			"object", "kueue_status"}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"staging_workloads"}, cols, pgx.CopyFromRows(upserts)); err != nil {
			return fmt.Errorf("copy workloads: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO workloads (namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
				pods_ready, requeue_at, created_at, admitted_at, evictions, last_seq, reason_detail, queue_time, object, kueue_status)
			SELECT namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
				pods_ready, requeue_at, created_at, admitted_at, evictions, last_seq, reason_detail, queue_time, object, kueue_status FROM staging_workloads
			ON CONFLICT (namespace, name) DO UPDATE SET
				uid = excluded.uid, local_queue = excluded.local_queue, cluster_queue = excluded.cluster_queue,
				priority = excluded.priority, status = excluded.status, admission = excluded.admission,
				reason = excluded.reason, message = excluded.message, pods_ready = excluded.pods_ready,
				requeue_at = excluded.requeue_at, created_at = excluded.created_at, admitted_at = excluded.admitted_at,
				evictions = excluded.evictions, last_seq = excluded.last_seq, reason_detail = excluded.reason_detail,
				queue_time = excluded.queue_time, object = excluded.object, kueue_status = excluded.kueue_status
			WHERE workloads.last_seq < excluded.last_seq`); err != nil {
			return fmt.Errorf("merge workloads: %w", err)
		}
	}
	if len(delNS) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM workloads WHERE (namespace, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, byKeys, delNS, delNames); err != nil {
			return err
		}
	}
	var cqs, flavors, resources []string
	var deltas []int64
	for fr, perCQ := range b.usageCQ {
		for cq, delta := range perCQ {
			if delta != 0 {
				cqs, flavors, resources, deltas = append(cqs, cq), append(flavors, fr.Flavor), append(resources, string(fr.Resource)), append(deltas, delta)
			}
		}
	}
	if len(deltas) > 0 {
		// One row per (queue, flavor, resource): the batch summed them.
		if _, err := tx.Exec(ctx, `
			INSERT INTO queue_usage (cluster_queue, flavor, resource, used)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
			ON CONFLICT (cluster_queue, flavor, resource) DO UPDATE SET used = queue_usage.used + excluded.used`,
			cqs, flavors, resources, deltas); err != nil {
			return fmt.Errorf("add usage: %w", err)
		}
	}
	for k, c := range b.configs {
		var err error
		if c.object == nil {
			_, err = tx.Exec(ctx, `DELETE FROM config_objects WHERE kind = $1 AND namespace = $2 AND name = $3`, k[0], k[1], k[2])
		} else {
			_, err = tx.Exec(ctx, `
				INSERT INTO config_objects (kind, namespace, name, object, last_seq, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
				ON CONFLICT (kind, namespace, name) DO UPDATE SET object = excluded.object, last_seq = excluded.last_seq,
					updated_at = excluded.updated_at, created_at = coalesce(config_objects.created_at, excluded.created_at)`,
				k[0], k[1], k[2], []byte(c.object), int64(c.lastSeq), c.time)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// podsReadyConfig reads a stored Configuration's requeuing timestamp
// (none, or no waitForPodsReady, means Eviction, Kueue's default) and
// whether waitForPodsReady is enabled.
func podsReadyConfig(conf []byte) (byEviction, enabled bool, err error) {
	if len(conf) == 0 {
		return true, false, nil
	}
	var c api.Configuration
	if err := json.Unmarshal(conf, &c); err != nil {
		return false, false, err
	}
	w := c.WaitForPodsReady
	enabled = w != nil && w.Enable
	if w == nil || w.RequeuingStrategy == nil || w.RequeuingStrategy.Timestamp == nil {
		return true, enabled, nil
	}
	return *w.RequeuingStrategy.Timestamp == api.RequeueByEviction, enabled, nil
}
