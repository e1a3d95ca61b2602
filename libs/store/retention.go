package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jetqueue/jetqueue/libs/events"
)

// The queries of the retention role (libs/retention): which finished
// workloads to expire, which ended histories the log may drop, and the
// projection's own retention. The projection keeps a finished workload's
// row and its events after the log forgets it: they are the history users
// query, until PruneHistory removes them.

// FinishedBefore lists the finished workloads that finished before cut
// and have not expired since, oldest finish first, at most limit.
func (s *Store) FinishedBefore(ctx context.Context, cut time.Time, limit int) ([]events.WorkloadRef, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT w.namespace, w.name FROM workloads w
		CROSS JOIN LATERAL (SELECT e.seq, e.time FROM workload_events e
			WHERE e.namespace = w.namespace AND e.name = w.name AND e.type = $1 ORDER BY e.seq DESC LIMIT 1) f
		WHERE w.status = $2 AND f.time < $3
		  AND NOT EXISTS (SELECT 1 FROM workload_events x
			WHERE x.namespace = w.namespace AND x.name = w.name AND x.type = $4 AND x.seq > f.seq)
		ORDER BY f.seq LIMIT $5`,
		string(events.WorkloadFinished), StatusFinished, cut, string(events.WorkloadExpired), limit)
	if err != nil {
		return nil, fmt.Errorf("list finished workloads: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.WorkloadRef, error) {
		var r events.WorkloadRef
		return r, row.Scan(&r.Namespace, &r.Name)
	})
}

// Ended is an event that ended a workload (a deletion or an expiry).
type Ended struct {
	Seq             uint64
	Namespace, Name string
	Time            time.Time
}

// EndedEvents lists the events that ended a workload with sequences in
// (after, through], in stream order, at most limit.
func (s *Store) EndedEvents(ctx context.Context, after, through uint64, limit int) ([]Ended, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT seq, namespace, name, time FROM workload_events
		WHERE seq > $1 AND seq <= $2 AND type = ANY($3) ORDER BY seq LIMIT $4`,
		int64(after), int64(through), []string{string(events.WorkloadDeleted), string(events.WorkloadExpired)}, limit)
	if err != nil {
		return nil, fmt.Errorf("list ended workloads: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Ended, error) {
		var e Ended
		var seq int64
		err := row.Scan(&seq, &e.Namespace, &e.Name, &e.Time)
		e.Seq = uint64(seq)
		return e, err
	})
}

// Pruned counts what PruneHistory removed.
type Pruned struct {
	Workloads, Events, Parked int64
}

// PruneHistory is the projection's own retention. It removes, for events
// before cut and at sequences up to through (what the log's retention has
// dealt with): the rows of finished workloads that expired, and the
// events of workloads the projection no longer holds a row for (deleted
// or expired ones); and parked events parked before cut. A live
// workload's row and history stay, however old.
func (s *Store) PruneHistory(ctx context.Context, cut time.Time, through uint64) (Pruned, error) {
	var p Pruned
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			DELETE FROM workloads w WHERE w.status = $1 AND w.last_seq <= $2
			  AND EXISTS (SELECT 1 FROM workload_events x WHERE x.namespace = w.namespace AND x.name = w.name
				AND x.type = $3 AND x.seq <= $2 AND x.time < $4
				AND x.seq > (SELECT max(f.seq) FROM workload_events f
					WHERE f.namespace = w.namespace AND f.name = w.name AND f.type = $5))`,
			StatusFinished, int64(through), string(events.WorkloadExpired), cut, string(events.WorkloadFinished))
		if err != nil {
			return fmt.Errorf("prune expired workloads: %w", err)
		}
		p.Workloads = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `
			DELETE FROM workload_events e WHERE e.seq <= $1 AND e.time < $2
			  AND NOT EXISTS (SELECT 1 FROM workloads w WHERE w.namespace = e.namespace AND w.name = e.name)`,
			int64(through), cut)
		if err != nil {
			return fmt.Errorf("prune history: %w", err)
		}
		p.Events = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM parked_events WHERE parked_at < $1`, cut)
		if err != nil {
			return fmt.Errorf("prune parked events: %w", err)
		}
		p.Parked = tag.RowsAffected()
		return nil
	})
	return p, err
}
