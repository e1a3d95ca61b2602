// Command podsready is jetqueue's waitForPodsReady service: it times out
// workloads whose pods are not ready, requeues them after backoff and deactivates them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "podsready:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("podsready", flag.ContinueOnError)
	var o service.Options
	service.RegisterFlags(fs, &o)
	var cfg podsready.Config
	podsready.RegisterFlags(fs, &cfg)
	if err := service.Parse(fs, args, os.Getenv); err != nil {
		return err
	}
	switch fs.Arg(0) {
	case "":
	case service.HealthcheckCommand:
		return service.Healthcheck(o)
	default:
		return fmt.Errorf("unknown command %q (the only one is %s)", fs.Arg(0), service.HealthcheckCommand)
	}
	return service.Run("podsready", o, func(ctx context.Context, rt *service.Runtime) error {
		return podsready.Run(ctx, rt, cfg)
	})
}
