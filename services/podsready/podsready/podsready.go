// Package podsready is the podsready service's shell.
package podsready

import (
	"context"
	"time"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/service"
)

// Config is the service's configuration.
type Config struct {
	NATSURL     string
	Shard       string
	Instance    string
	LeaseTTL    time.Duration
	ManualClock bool
	Stream      bus.StreamOptions
}

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	<-ctx.Done()
	return nil
}
