// Command admission is jetqueue's admission service: it follows JQ_EVENTS,
// runs the scheduling core and publishes its decisions.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/admission/admission"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "admission:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("admission", flag.ContinueOnError)
	var o service.Options
	service.RegisterFlags(fs, &o)
	var cfg admission.Config
	admission.RegisterFlags(fs, &cfg)
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
	return service.Run("admission", o, func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, cfg)
	})
}
