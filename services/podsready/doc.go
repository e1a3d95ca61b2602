// Package podsready will hold the podsready service (issue 7): PodsReady
// timeouts, requeue backoff and deactivation on the bus. The rules already
// live in libs/podsready and run in the simulator.
package podsready
