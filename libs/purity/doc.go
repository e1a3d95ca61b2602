// Package purity holds the test that keeps the decision core free of I/O:
// no package of the core may import NATS, pgx, net/http, zap or os/exec.
package purity
