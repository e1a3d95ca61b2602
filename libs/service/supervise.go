package service

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// A service never exits on a fault: NATS restarting, a JetStream request
// timing out or PostgreSQL going away make its main return an error, and
// exiting on it would leave recovery to whatever restarts processes (none,
// under `jqctl dev` or a plain binary). supervise starts main again with a
// capped exponential backoff, readiness off in between, until ctx ends.
// Every service's main rebuilds its state from the log, so a restart in the
// process is the same as a restart of the process.
//
// Only an error marked Permanent (a configuration that can never work)
// ends the process.

const (
	restartBackoffMin = 100 * time.Millisecond
	restartBackoffMax = 10 * time.Second
	// healthyRun is how long a main must run for the backoff to start
	// again from its minimum.
	healthyRun = time.Minute
)

type permanent struct{ err error }

func (p permanent) Error() string   { return p.err.Error() }
func (p permanent) Unwrap() error   { return p.err }
func (p permanent) Permanent() bool { return true }

// Permanent marks an error that restarting cannot cure (bad flags, a file
// that does not parse): the service exits with it instead of retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was marked Permanent, or is an error
// of a package below this one that says so itself (a Permanent() bool
// method, as bus's configuration errors have).
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// freshRegistry gives the next run of main an empty registry for its
// collectors; /metrics serves it beside the base registry.
func (r *Runtime) freshRegistry() {
	reg := prometheus.NewRegistry()
	r.Registry = reg
	r.current.Store(reg)
}

// Restarts is how many times main was started again after a fault.
func (r *Runtime) Restarts() int {
	return int(r.restartCount.Load())
}

func (r *Runtime) supervise(ctx context.Context, main Main) error {
	backoff := restartBackoffMin
	for {
		start := time.Now()
		err := main(ctx, r)
		if ctx.Err() != nil || err == nil || IsPermanent(err) {
			return err
		}
		r.SetReady(false)
		if time.Since(start) >= healthyRun {
			backoff = restartBackoffMin
		}
		r.Log.Error("service failed; starting it again", zap.Error(err), zap.Duration("in", backoff))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartBackoffMax)
		r.restarts.Inc()
		r.restartCount.Add(1)
		r.freshRegistry()
	}
}
