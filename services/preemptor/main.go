// Command preemptor is jetqueue's preemptor service: it carries out the
// preemptions admission decides, evicting each victim fenced on its subject.
package main

import (
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
)

func main() { service.Command("preemptor", preemptor.RegisterFlags, preemptor.Run) }
