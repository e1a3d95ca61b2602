package admission

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// Batches: a JQ-Batch's members are decided together once all of them
// are in the log, or released when they cannot all come.

// openBatch is a batch whose members are still arriving.
type openBatch struct {
	id      string
	missing int
	// since is when this instance first saw the batch, by the wall clock.
	since time.Time
	// held are the events waiting for the batch, in log order.
	held    []read
	closing bool
}

// batchMaxWait bounds how long an incomplete batch holds its own members
// back: only a sender that died mid-batch (or lied about its size) leaves
// one incomplete. Nothing outside the batch ever waits for it.
const batchMaxWait = 10 * time.Second

// closedMemory is how long (by event time) a closed batch is remembered,
// so that its late members apply at once instead of opening it again.
const closedMemory = time.Minute

// release applies a batch's held events in log order, at the point of the
// log where the batch completed or was closed.
func (s *Service) release(ob *openBatch, at time.Time) error {
	delete(s.open, ob.id)
	s.closed[ob.id] = at
	for _, r := range ob.held {
		if s.waiting[r.subject] == ob.id {
			delete(s.waiting, r.subject)
		}
	}
	for _, r := range ob.held {
		if err := s.process(r); err != nil {
			return err
		}
	}
	for id, t := range s.closed {
		if at.Sub(t) > closedMemory {
			delete(s.closed, id)
		}
	}
	return nil
}

// releaseBelowFloor releases, once caught up, every open batch with a
// member at or below the purge floor. Below it the retention role may
// have purged the histories of ended workloads, members of this batch
// among them, so the batch may never complete; the retention role purges
// a batched history only when the log is well past it (DefaultBatchSettle
// in libs/retention), when the batch had long completed or been closed.
// Waiting for it would hold back the later events of its members'
// subjects, admissions among them, and decide on quota the log says is
// taken. Releasing it applies what it holds, in log order, as a close
// does.
//
// The floor is read again while a batch is open: the retention role may
// have purged more while this replay was reading the log.
func (s *Service) releaseBelowFloor(ctx context.Context) error {
	if len(s.open) == 0 {
		return nil
	}
	floor, err := bus.PurgeFloor(ctx, s.js)
	if err != nil {
		return err
	}
	s.floor = max(s.floor, floor)
	if s.floor == 0 {
		return nil
	}
	var due []*openBatch
	for _, ob := range s.open {
		if len(ob.held) > 0 && ob.held[0].seq <= s.floor {
			due = append(due, ob)
		}
	}
	slices.SortFunc(due, func(a, b *openBatch) int { return cmp.Compare(a.held[0].seq, b.held[0].seq) })
	for _, ob := range due {
		if s.open[ob.id] != ob {
			continue
		}
		s.log.Info("batch below the purge floor released: its missing members may have been purged",
			zap.String("batch", ob.id), zap.Int("missing", ob.missing), zap.Uint64("floor", s.floor))
		if err := s.release(ob, s.seen); err != nil {
			return err
		}
	}
	return nil
}

// closeBatch applies a BatchClosed read from the log.
func (s *Service) closeBatch(id string, at time.Time) error {
	ob := s.open[id]
	if ob == nil {
		return nil
	}
	s.log.Warn("batch closed incomplete; deciding its members without the rest", zap.String("batch", id), zap.Int("missing", ob.missing))
	return s.release(ob, at)
}

// closeStaleBatches gives up, in the log, on the batches that have waited
// longer than batchMaxWait. Their members are released when this
// instance, like every other, reads the BatchClosed back.
func (s *Service) closeStaleBatches(ctx context.Context) error {
	now := s.cfg.Wall()
	for _, ob := range s.open {
		if ob.closing || now.Sub(ob.since) <= batchMaxWait {
			continue
		}
		ev := events.Event{ID: "admission/batch-closed/" + ob.id, Type: events.BatchClosed, Source: source,
			Time: s.now(ctx), Subject: events.BatchSubject, Data: &events.BatchClosedData{Batch: ob.id, Missing: ob.missing}}
		if _, _, err := bus.Publish(ctx, s.js, ev, nil); err != nil {
			return err
		}
		ob.closing = true
	}
	return nil
}
