// Command podsready is jetqueue's waitForPodsReady service: it times out
// workloads whose pods are not ready, requeues them after backoff and deactivates them.
package main

import (
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
)

func main() { service.Command("podsready", podsready.RegisterFlags, podsready.Run) }
