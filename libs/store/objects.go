package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
	"github.com/jetqueue/jetqueue/libs/status"
)

// ConfigObject is one configuration object as the projection holds it.
type ConfigObject struct {
	Kind, Namespace, Name string
	Object                json.RawMessage
	// Seq is the stream sequence of its last change.
	Seq              uint64
	Created, Updated time.Time
}

// ConfigObjects lists the objects of a kind in (namespace, name) order:
// every one, those of one namespace, or the one named.
func (s *Store) ConfigObjects(ctx context.Context, kind, namespace, name string) ([]ConfigObject, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT kind, namespace, name, object, last_seq, coalesce(created_at, 'epoch'), coalesce(updated_at, 'epoch')
		FROM config_objects WHERE kind = $1 AND ($2 = '' OR namespace = $2) AND ($3 = '' OR name = $3)
		ORDER BY namespace, name`, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConfigObject, error) {
		var c ConfigObject
		var seq int64
		err := r.Scan(&c.Kind, &c.Namespace, &c.Name, &c.Object, &seq, &c.Created, &c.Updated)
		c.Seq = uint64(seq)
		return c, err
	})
}

// QueueFacts is what the projection knows of every queue: counts and
// usage per ClusterQueue and per LocalQueue ([namespace, name]).
type QueueFacts struct {
	CQPending, CQAdmitted map[string]int32
	CQUsage               map[string]map[quota.FlavorResource]int64
	LQPending, LQAdmitted map[[2]string]int32
	LQUsage               map[[2]string]map[quota.FlavorResource]int64
}

// Queues reads the counts and usage of every queue.
func (s *Store) Queues(ctx context.Context) (QueueFacts, error) {
	f := QueueFacts{CQPending: map[string]int32{}, CQAdmitted: map[string]int32{}, CQUsage: map[string]map[quota.FlavorResource]int64{},
		LQPending: map[[2]string]int32{}, LQAdmitted: map[[2]string]int32{}, LQUsage: map[[2]string]map[quota.FlavorResource]int64{}}
	rows, err := s.Pool.Query(ctx, `
		SELECT cluster_queue, namespace, local_queue, status, count(*) FROM workloads
		WHERE status IN ('pending', 'admitted') GROUP BY 1, 2, 3, 4`)
	if err != nil {
		return f, err
	}
	for rows.Next() {
		var cq, ns, lq, st string
		var n int32
		if err := rows.Scan(&cq, &ns, &lq, &st, &n); err != nil {
			rows.Close()
			return f, err
		}
		if st == StatusPending {
			f.CQPending[cq] += n
			f.LQPending[[2]string{ns, lq}] += n
		} else {
			f.CQAdmitted[cq] += n
			f.LQAdmitted[[2]string{ns, lq}] += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, err
	}
	rows, err = s.Pool.Query(ctx, `SELECT cluster_queue, flavor, resource, used FROM queue_usage WHERE used <> 0`)
	if err != nil {
		return f, err
	}
	for rows.Next() {
		var cq, fl, res string
		var used int64
		if err := rows.Scan(&cq, &fl, &res, &used); err != nil {
			rows.Close()
			return f, err
		}
		if f.CQUsage[cq] == nil {
			f.CQUsage[cq] = map[quota.FlavorResource]int64{}
		}
		f.CQUsage[cq][quota.FlavorResource{Flavor: fl, Resource: corev1.ResourceName(res)}] = used
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, err
	}
	rows, err = s.Pool.Query(ctx, `SELECT namespace, local_queue, admission FROM workloads WHERE status = 'admitted' AND admission IS NOT NULL`)
	if err != nil {
		return f, err
	}
	defer rows.Close()
	for rows.Next() {
		var ns, lq string
		var adm []byte
		if err := rows.Scan(&ns, &lq, &adm); err != nil {
			return f, err
		}
		var a scheduler.Admission
		if err := json.Unmarshal(adm, &a); err != nil {
			return f, err
		}
		k := [2]string{ns, lq}
		if f.LQUsage[k] == nil {
			f.LQUsage[k] = map[quota.FlavorResource]int64{}
		}
		for fr, v := range a.TotalUsage() {
			f.LQUsage[k][fr] += v
		}
	}
	return f, rows.Err()
}

// WorkloadObject is one workload's row with its submitted object and its
// Kueue status.
type WorkloadObject struct {
	WorkloadView
	Object    json.RawMessage
	Kueue     status.Workload
	Admission *scheduler.Admission
	Seq       uint64
}

// WorkloadObjects returns one page of workloads as ListWorkloads does,
// with their objects.
func (s *Store) WorkloadObjects(ctx context.Context, f Filter) ([]WorkloadObject, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var afterNS, afterName string
	if f.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(f.After)
		ns, name, ok := strings.Cut(string(raw), "\x00")
		if err != nil || !ok {
			return nil, "", ErrBadCursor
		}
		afterNS, afterName = ns, name
	}
	match, matchArgs, err := matchSQL(f.Match, 10)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
		       created_at, admitted_at, evictions, object, kueue_status, last_seq
		FROM workloads
		WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR local_queue = $2) AND ($3 = '' OR cluster_queue = $3)
		  AND ($4 = '' OR status = $4) AND (namespace, name) > ($5, $6)
		  AND ($8::text[] IS NULL OR namespace = ANY($8)) AND ($9 = '' OR name = $9)`+match+`
		ORDER BY namespace, name
		LIMIT $7`, append([]any{f.Namespace, f.LocalQueue, f.ClusterQueue, f.Status, afterNS, afterName, limit + 1, namespaces(f.Namespaces), f.Name},
		matchArgs...)...)
	if err != nil {
		return nil, "", err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkloadObject, error) {
		var w WorkloadObject
		var adm, kst []byte
		var seq int64
		v := &w.WorkloadView
		if err := r.Scan(&v.Namespace, &v.Name, &v.UID, &v.LocalQueue, &v.ClusterQueue, &v.Priority, &v.Status, &adm,
			&v.Reason, &v.Message, &v.CreatedAt, &v.AdmittedAt, &v.Evictions, &w.Object, &kst, &seq); err != nil {
			return w, err
		}
		w.Seq = uint64(seq)
		if len(adm) > 0 {
			w.Admission = new(scheduler.Admission)
			if err := json.Unmarshal(adm, w.Admission); err != nil {
				return w, err
			}
		}
		if len(kst) > 0 {
			if err := json.Unmarshal(kst, &w.Kueue); err != nil {
				return w, err
			}
		}
		return w, nil
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = Cursor(last.Namespace, last.Name)
	}
	return out, next, nil
}
