// Package preemptor is the preemptor service's shell.
package preemptor

import (
	"context"
	"time"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/service"
)

// Config is the service's configuration.
type Config struct {
	NATSURL  string
	Shard    string
	Instance string
	LeaseTTL time.Duration
	Stream   bus.StreamOptions
}

// Run is the service's main: it returns when ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	<-ctx.Done()
	return nil
}
