package admission

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/bus"
)

// ackWait bounds the wait for a batch's acknowledgements (see decide):
// nats.go's default for a synchronous publish. A publication unanswered
// after it has an unknown fate, and the loop starts over from the log.
const ackWait = 5 * time.Second

// requestError is a request of the loop to JetStream that failed before
// it changed anything, in JetStream or in the engine: reading the log (a
// consumer's creation or info, before any event of the batch is
// applied), a standby's acquire of the lease, a progress mark. Asked
// again, it finds the state as it was, so a transient failure of it is
// retried in place (see retry). Anything else that fails (a publication
// whose fate is unknown, the lease lost) still starts the loop over.
type requestError struct {
	request string // the metric's label: fetch, lease, progress
	err     error
}

func (e requestError) Error() string { return e.request + ": " + e.err.Error() }
func (e requestError) Unwrap() error { return e.err }

// retry says whether err is a request of the loop that failed for now
// (a NATS server killed or frozen, a stream or bucket between leaders,
// quorum lost), and then counts it and waits b's next backoff: the loop
// asks again where it was. Restarting the loop for it instead (as every
// such error did) cost a re-acquire of the lease, a snapshot's reload,
// often unreadable during the fault, and then a replay of the log: the
// chaos-cluster suite measured 11-16 s from the fault to the next
// admission. A lost lease is never retried: it must stop the leader.
func (s *Service) retry(ctx context.Context, err error, b *bus.Backoff) bool {
	var re requestError
	if !errors.As(err, &re) || errors.Is(err, bus.ErrLeaseLost) || !bus.Transient(err) {
		return false
	}
	s.m.Retried(re.request)
	s.log.Info("a request to JetStream failed for now; asking again", zap.String("request", re.request), zap.Error(re.err))
	return bus.Sleep(ctx, b.Next())
}
