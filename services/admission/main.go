// Command admission is jetqueue's admission service: it follows JQ_EVENTS,
// runs the scheduling core and publishes its decisions.
package main

import (
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/admission/admission"
)

func main() { service.Command("admission", admission.RegisterFlags, admission.Run) }
