// Command ingest serves jetqueue's HTTP API and runs the projector.
package main

import (
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

func main() { service.Command("ingest", ingest.RegisterFlags, ingest.Run) }
