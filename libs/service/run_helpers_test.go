package service

import (
	"context"
	"testing"

	"go.uber.org/zap"
)

// runService runs a service with options o whose main waits for its stop,
// and returns its runtime once it runs and a stop that returns what
// RunContext returned. A service that fails to start fails the test.
func runService(t *testing.T, o Options) (*Runtime, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *Runtime, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- RunContext(ctx, "test", o, zap.NewNop(), func(ctx context.Context, rt *Runtime) error {
			started <- rt
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case rt := <-started:
		return rt, func() error { cancel(); return <-errc }
	case err := <-errc:
		cancel()
		t.Fatalf("the service did not start: %v", err)
		return nil, nil
	}
}
