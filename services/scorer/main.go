// Command scorer is jetqueue's scorer service: it ranks nodes for admitted
// workloads, publishes where their pods should go, and answers ranking
// queries.
package main

import (
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

func main() { service.Command("scorer", scorer.RegisterFlags, scorer.Run) }
