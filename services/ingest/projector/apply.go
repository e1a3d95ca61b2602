package projector

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/store"
)

// apply writes a batch. A batch the database refuses for its content is
// split in halves, applied in order, until the events at fault stand
// alone; each of those is parked and applied again. Any other error is
// returned for the caller to retry the batch: store.Apply drops the part
// already written, and the parking decisions stay in the entries.
func (p *projector) apply(ctx context.Context, batch []entry) error {
	recs := make([]store.Record, len(batch))
	for i, e := range batch {
		recs[i] = e.rec
	}
	n, err := p.cfg.Store.Apply(ctx, recs)
	if err == nil {
		p.written(batch[len(batch)-n:])
		return nil
	}
	if !store.Unstorable(err) {
		return err
	}
	if len(batch) > 1 {
		mid := len(batch) / 2
		if err := p.apply(ctx, batch[:mid]); err != nil {
			return err
		}
		return p.apply(ctx, batch[mid:])
	}
	e := &batch[0]
	if e.rec.Parked != nil || e.rec.Gone > 0 {
		// Nothing left to set aside: the database refuses the parked row
		// itself. Retried like an outage, and loud.
		return errors.Join(errParkRefused, err)
	}
	e.park(err)
	return p.apply(ctx, batch)
}

var errParkRefused = errors.New("the database refuses even the parked event")

// written reports the entries a batch wrote: parked events through Skip
// (log, metric, /readyz), every event in the projector's metrics.
func (p *projector) written(done []entry) {
	for _, e := range done {
		if e.rec.Parked != nil {
			p.skip(e.rec.Seq, e.typ, errors.New(e.rec.Parked.Reason))
		}
		if e.rec.Gone == 0 {
			p.m.applied.Inc()
		}
	}
	if len(done) > 0 {
		last := done[len(done)-1].rec
		p.m.position.Set(float64(last.Seq + max(last.Gone, 1) - 1))
	}
}

func (p *projector) skip(seq uint64, typ string, err error) {
	if p.cfg.Skip != nil {
		p.cfg.Skip(seq, typ, err)
		return
	}
	p.log.Error("parked an event the projection cannot store", zap.Uint64("seq", seq), zap.String("type", typ), zap.Error(err))
}
