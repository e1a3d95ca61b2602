// Command jqctl is jetqueue's CLI. This build has the local commands;
// the server commands arrive with the HTTP API.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
