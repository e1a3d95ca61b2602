package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/quota"
	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// Explanation says why a workload is where it is.
type Explanation struct {
	WorkloadView
	// Detail is the last reason value the core gave: token, podSet,
	// flavor, resource, cohort and shortfall.
	Detail *scheduler.Reason `json:"detail,omitempty"`
	// Ahead are the pending workloads of its ClusterQueue ordered before
	// it (higher priority, or equal and older), first 50. AheadCount counts
	// them all.
	Ahead      []string `json:"ahead"`
	AheadCount int      `json:"aheadCount"`
	// AheadHidden counts the workloads of the first 50 that the caller
	// may not read: its answer names only the others (services/ingest's
	// redaction), so another namespace's workloads are a count.
	AheadHidden int `json:"aheadHidden,omitempty"`
}

// Explain returns a workload's explanation, naming every workload ahead
// of it: the caller redacts it to what its reader may see.
func (s *Store) Explain(ctx context.Context, namespace, name string) (Explanation, error) {
	v, _, err := s.GetWorkload(ctx, namespace, name)
	if err != nil {
		return Explanation{}, err
	}
	ex := Explanation{WorkloadView: v, Ahead: []string{}}
	var detail []byte
	if err := s.Pool.QueryRow(ctx, `SELECT reason_detail FROM workloads WHERE namespace = $1 AND name = $2`, namespace, name).Scan(&detail); err != nil {
		return ex, err
	}
	if len(detail) > 0 {
		ex.Detail = new(scheduler.Reason)
		if err := json.Unmarshal(detail, ex.Detail); err != nil {
			return ex, err
		}
	}
	if v.Status != StatusPending || v.ClusterQueue == "" {
		return ex, nil
	}
	var queued time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT `+queueTime+` FROM workloads WHERE namespace = $1 AND name = $2`, namespace, name).Scan(&queued); err != nil {
		return ex, err
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT namespace || '/' || name, count(*) OVER () FROM workloads
		WHERE status = 'pending' AND requeue_at IS NULL AND cluster_queue = $1
		  AND (priority > $2 OR (priority = $2 AND (`+queueTime+`, `+queueKey+`) < ($3, $4 COLLATE "C")))
		ORDER BY `+queueOrder+` LIMIT 50`, v.ClusterQueue, v.Priority, queued, namespace+"/"+name)
	if err != nil {
		return ex, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k, &ex.AheadCount); err != nil {
			return ex, err
		}
		ex.Ahead = append(ex.Ahead, k)
	}
	return ex, rows.Err()
}

// A ClusterQueue's queue order, as the admission engine's (libs/queue
// Less): higher priority first, then earlier queue time (creation, or the
// eviction by a PodsReady timeout with timestamp Eviction), then the key
// namespace/name in byte order. A workload waiting out a requeue backoff
// (requeue_at set) is in no queue until its Requeued event.
const (
	queueTime  = `COALESCE(queue_time, created_at)`
	queueKey   = `(namespace || '/' || name) COLLATE "C"`
	queueOrder = `priority DESC, ` + queueTime + `, ` + queueKey
)

// PendingWorkload is one entry of Kueue's PendingWorkloadsSummary.
type PendingWorkload struct {
	Namespace              string    `json:"-"`
	Name                   string    `json:"-"`
	CreatedAt              time.Time `json:"-"`
	Priority               int32     `json:"priority"`
	LocalQueueName         string    `json:"localQueueName"`
	PositionInClusterQueue int32     `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32     `json:"positionInLocalQueue"`
}

// PendingWorkloads lists a ClusterQueue's pending workloads in queue order
// with their positions (Kueue's visibility API), optionally only those of
// one LocalQueue: offset and limit then count within the LocalQueue, as
// Kueue's do. A stopped LocalQueue's (spec.stopPolicy Hold or
// HoldAndDrain) are in no queue, as the engine holds them out and Kueue
// drops them from its queues: they are neither listed nor counted in
// anyone's position.
func (s *Store) PendingWorkloads(ctx context.Context, clusterQueue, namespace, localQueue string, limit, offset int) ([]PendingWorkload, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT namespace, name, created_at, priority, local_queue, pos_cq, pos_lq FROM (
			SELECT namespace, name, created_at, priority, local_queue,
			       row_number() OVER (ORDER BY `+queueOrder+`) - 1 AS pos_cq,
			       row_number() OVER (PARTITION BY namespace, local_queue ORDER BY `+queueOrder+`) - 1 AS pos_lq
			FROM workloads w WHERE status = 'pending' AND requeue_at IS NULL AND cluster_queue = $1
			  AND NOT EXISTS (SELECT 1 FROM config_objects lq WHERE lq.kind = 'LocalQueue' AND lq.namespace = w.namespace
			                  AND lq.name = w.local_queue AND lq.object->'spec'->>'stopPolicy' IN ('Hold', 'HoldAndDrain'))) q
		WHERE ($2 = '' OR (namespace = $2 AND local_queue = $3))
		ORDER BY pos_cq LIMIT $4 OFFSET $5`, clusterQueue, namespace, localQueue, limit, offset)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingWorkload, error) {
		var p PendingWorkload
		err := r.Scan(&p.Namespace, &p.Name, &p.CreatedAt, &p.Priority, &p.LocalQueueName, &p.PositionInClusterQueue, &p.PositionInLocalQueue)
		return p, err
	})
}

// LocalQueueTarget returns the ClusterQueue a LocalQueue points to.
func (s *Store) LocalQueueTarget(ctx context.Context, namespace, name string) (string, error) {
	var cq *string
	err := s.Pool.QueryRow(ctx, `SELECT object->'spec'->>'clusterQueue' FROM config_objects WHERE kind = 'LocalQueue' AND namespace = $1 AND name = $2`,
		namespace, name).Scan(&cq)
	if err == pgx.ErrNoRows || cq == nil {
		return "", ErrNotFound
	}
	return *cq, err
}

// ClusterQueueSummary is one ClusterQueue with its usage and counts.
type ClusterQueueSummary struct {
	Name     string          `json:"name"`
	Spec     json.RawMessage `json:"spec"`
	Usage    []Usage         `json:"usage"`
	Pending  int             `json:"pending"`
	Admitted int             `json:"admitted"`
}

// ClusterQueues summarises every ClusterQueue, or one by name.
func (s *Store) ClusterQueues(ctx context.Context, name string) ([]ClusterQueueSummary, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT c.name, c.object->'spec',
		       (SELECT count(*) FROM workloads w WHERE w.cluster_queue = c.name AND w.status = 'pending'),
		       (SELECT count(*) FROM workloads w WHERE w.cluster_queue = c.name AND w.status = 'admitted')
		FROM config_objects c WHERE c.kind = 'ClusterQueue' AND ($1 = '' OR c.name = $1) ORDER BY c.name`, name)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClusterQueueSummary, error) {
		var c ClusterQueueSummary
		err := r.Scan(&c.Name, &c.Spec, &c.Pending, &c.Admitted)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Usage, err = s.ClusterQueueUsage(ctx, out[i].Name); err != nil {
			return nil, err
		}
		if out[i].Usage == nil {
			out[i].Usage = []Usage{}
		}
		var spec api.ClusterQueueSpec
		if json.Unmarshal(out[i].Spec, &spec) != nil {
			continue
		}
		nominal := map[quota.FlavorResource]int64{}
		for _, rg := range spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					nominal[quota.FlavorResource{Flavor: f.Name, Resource: r.Name}] = quota.Value(r.Name, r.NominalQuota)
				}
			}
		}
		for j := range out[i].Usage {
			u := &out[i].Usage[j]
			u.Nominal = nominal[quota.FlavorResource{Flavor: u.Flavor, Resource: corev1.ResourceName(u.Resource)}]
			u.Borrowed = max(0, u.Used-u.Nominal)
		}
	}
	return out, nil
}

// ClusterQueueExists reports whether the projection holds a ClusterQueue.
func (s *Store) ClusterQueueExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM config_objects WHERE kind = 'ClusterQueue' AND namespace = '' AND name = $1)`, name).Scan(&ok)
	return ok, err
}
