// Package e2e runs the conformance scenarios end to end: real embedded
// NATS JetStream, real PostgreSQL, and the ingest and admission services
// through their real entry points, driven over the HTTP API and read back
// from the projection.
package e2e
