// Command preemptor is jetqueue's preemptor service: it carries out the
// preemptions admission decides, evicting each victim fenced on its subject.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "preemptor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("preemptor", flag.ContinueOnError)
	var o service.Options
	service.RegisterFlags(fs, &o)
	var cfg preemptor.Config
	preemptor.RegisterFlags(fs, &cfg)
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
	return service.Run("preemptor", o, func(ctx context.Context, rt *service.Runtime) error {
		return preemptor.Run(ctx, rt, cfg)
	})
}
