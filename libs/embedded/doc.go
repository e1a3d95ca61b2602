// Package embedded starts the servers jetqueue runs beside, on this
// machine: a JetStream server in-process and a private PostgreSQL cluster
// from the local server binaries. `jqctl dev` runs on them, and so do the
// tests (through testenv) when no DATABASE_URL is given.
package embedded
