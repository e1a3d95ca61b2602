// Command jqctl is jetqueue's CLI. This build has the local commands;
// the server commands arrive with the HTTP API.
package main

import (
	"os"

	// Initialised before kubectl's get package, which translates at
	// init (see the package).
	_ "github.com/jetqueue/jetqueue/cmd/jqctl/internal/untranslated"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
