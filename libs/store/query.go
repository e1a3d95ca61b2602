package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

// WorkloadView is a workload as the query API shows it (API.md).
type WorkloadView struct {
	Namespace    string                       `json:"namespace"`
	Name         string                       `json:"name"`
	UID          string                       `json:"uid"`
	LocalQueue   string                       `json:"localQueue"`
	ClusterQueue string                       `json:"clusterQueue"`
	Priority     int32                        `json:"priority"`
	Status       string                       `json:"status"`
	Assignment   map[string]map[string]string `json:"assignment,omitempty"`
	PodCounts    map[string]int32             `json:"podCounts,omitempty"`
	Reason       string                       `json:"reason,omitempty"`
	Message      string                       `json:"message,omitempty"`
	CreatedAt    time.Time                    `json:"createdAt"`
	AdmittedAt   *time.Time                   `json:"admittedAt,omitempty"`
	Evictions    int32                        `json:"evictions"`
}

// Filter selects workloads; empty fields do not filter.
type Filter struct {
	Namespace, LocalQueue, ClusterQueue, Status string
	Limit                                       int
	// After is the opaque cursor of the previous page.
	After string
	// Namespaces, when not nil, limits the list to these namespaces (the
	// ones the caller may see); an empty non-nil slice matches nothing.
	Namespaces []string
	// Name, when set, is the one name to list (WorkloadObjects only).
	Name string
	// Match is a label and field selector's requirements, evaluated in
	// the query (WorkloadObjects only; selector.go).
	Match []Requirement
}

// ErrBadCursor is returned for a cursor this store did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// ListWorkloads returns one page in (namespace, name) order, and the cursor
// of the next page ("" at the end). Keyset pagination: the cursor is the
// last key, so pages stay stable and cheap however deep.
func (s *Store) ListWorkloads(ctx context.Context, f Filter) ([]WorkloadView, string, error) {
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
	rows, err := s.Pool.Query(ctx, `
		SELECT namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
		       created_at, admitted_at, evictions
		FROM workloads
		WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR local_queue = $2) AND ($3 = '' OR cluster_queue = $3)
		  AND ($4 = '' OR status = $4) AND (namespace, name) > ($5, $6)
		  AND ($8::text[] IS NULL OR namespace = ANY($8))
		ORDER BY namespace, name
		LIMIT $7`, f.Namespace, f.LocalQueue, f.ClusterQueue, f.Status, afterNS, afterName, limit+1, namespaces(f.Namespaces))
	if err != nil {
		return nil, "", err
	}
	out, err := pgx.CollectRows(rows, scanView)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = base64.RawURLEncoding.EncodeToString([]byte(last.Namespace + "\x00" + last.Name))
	}
	return out, next, nil
}

// namespaces is a Filter's namespace limit as a query argument: NULL for
// none, else the array (empty matches nothing).
func namespaces(nss []string) any {
	if nss == nil {
		return nil
	}
	return append([]string{}, nss...)
}

// ErrNotFound is returned for a workload the projection does not hold.
var ErrNotFound = errors.New("not found")

// Event is one entry of a workload's history.
type Event struct {
	Seq  uint64          `json:"seq"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// GetWorkload returns one workload and its whole history.
func (s *Store) GetWorkload(ctx context.Context, namespace, name string) (WorkloadView, []Event, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT namespace, name, uid, local_queue, cluster_queue, priority, status, admission, reason, message,
		       created_at, admitted_at, evictions
		FROM workloads WHERE namespace = $1 AND name = $2`, namespace, name)
	if err != nil {
		return WorkloadView{}, nil, err
	}
	v, err := pgx.CollectExactlyOneRow(rows, scanView)
	if errors.Is(err, pgx.ErrNoRows) {
		return WorkloadView{}, nil, fmt.Errorf("workload %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return WorkloadView{}, nil, err
	}
	hist, err := s.Pool.Query(ctx, `SELECT seq, type, time, data FROM workload_events WHERE namespace = $1 AND name = $2 ORDER BY seq`, namespace, name)
	if err != nil {
		return WorkloadView{}, nil, err
	}
	evs, err := pgx.CollectRows(hist, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var seq int64
		err := r.Scan(&seq, &e.Type, &e.Time, &e.Data)
		e.Seq = uint64(seq)
		return e, err
	})
	return v, evs, err
}

// Usage is one ClusterQueue's usage of one flavor and resource, in
// Kueue's units (milli-cpu, whole units otherwise).
type Usage struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	Used     int64  `json:"used"`
	// Nominal and Borrowed (usage above nominal) are filled by
	// ClusterQueues from the queue's spec.
	Nominal  int64 `json:"nominal,omitempty"`
	Borrowed int64 `json:"borrowed,omitempty"`
}

// ClusterQueueUsage returns a queue's usage by flavor and resource.
func (s *Store) ClusterQueueUsage(ctx context.Context, cq string) ([]Usage, error) {
	rows, err := s.Pool.Query(ctx, `SELECT flavor, resource, used FROM queue_usage WHERE cluster_queue = $1 AND used <> 0 ORDER BY flavor, resource`, cq)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Usage, error) {
		var u Usage
		err := r.Scan(&u.Flavor, &u.Resource, &u.Used)
		return u, err
	})
}

func scanView(r pgx.CollectableRow) (WorkloadView, error) {
	var v WorkloadView
	var adm []byte
	if err := r.Scan(&v.Namespace, &v.Name, &v.UID, &v.LocalQueue, &v.ClusterQueue, &v.Priority, &v.Status, &adm,
		&v.Reason, &v.Message, &v.CreatedAt, &v.AdmittedAt, &v.Evictions); err != nil {
		return v, err
	}
	if len(adm) > 0 {
		var a scheduler.Admission
		if err := json.Unmarshal(adm, &a); err != nil {
			return v, err
		}
		v.Assignment, v.PodCounts = map[string]map[string]string{}, map[string]int32{}
		for _, ps := range a.PodSets {
			fl := map[string]string{}
			for r, f := range ps.Flavors {
				fl[string(r)] = f
			}
			v.Assignment[ps.Name] = fl
			v.PodCounts[ps.Name] = ps.Count
		}
	}
	return v, nil
}
