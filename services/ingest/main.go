// Command ingest serves jetqueue's HTTP API and runs the projector.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	var o service.Options
	service.RegisterFlags(fs, &o)
	var cfg ingest.Config
	ingest.RegisterFlags(fs, &cfg)
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
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("--database-url (or JQ_DATABASE_URL or DATABASE_URL) is required")
	}
	return service.Run("ingest", o, func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, cfg)
	})
}
