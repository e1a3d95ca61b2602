// Command scorer is jetqueue's scorer service: it ranks nodes for admitted
// workloads, publishes where their pods should go, and answers ranking
// queries.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scorer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("scorer", flag.ContinueOnError)
	var o service.Options
	service.RegisterFlags(fs, &o)
	var cfg scorer.Config
	scorer.RegisterFlags(fs, &cfg)
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
	return service.Run("scorer", o, func(ctx context.Context, rt *service.Runtime) error {
		return scorer.Run(ctx, rt, cfg)
	})
}
