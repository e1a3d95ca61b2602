// Package chaos is jetqueue's fault-injection suite. It runs the five
// services as separate OS processes built from the repository (two
// admission instances, leader and standby; two ingest instances), on a
// nats-server process and a private PostgreSQL cluster of its own, under a
// steady load of submissions, finishes and priority changes in Kueue's
// performance-test shape (cohorts of ClusterQueues that reclaim within
// the cohort and preempt lower priorities within the queue). Meanwhile it
// kills every service with SIGKILL at seeded random moments and restarts
// it, kills the admission leader so its standby takes over after the
// lease TTL, kills PostgreSQL's postmaster and NATS once each and restarts
// them on the same port and data.
//
// Afterwards it reads the whole JQ_EVENTS log and checks, recomputing
// everything from the events' payloads (Check): every accepted submission
// is in the log exactly once; no workload is admitted twice without an
// eviction between; after every event no ClusterQueue or cohort holds
// more than its quota allows; every workload still pending is genuinely
// blocked; and the projection equals the log.
//
// TestChaosCluster runs the same on a three-server JetStream cluster,
// every stream and bucket at R3, and strikes the cluster: a stream
// leader or follower killed, a server stopped, a stepdown, quorum lost,
// all restarted. It also accounts for every answer the load's client got.
//
//	cd e2e && go test -count=1 -v -run 'TestChaos$' ./chaos          # short run
//	CHAOS_DURATION=10m CHAOS_SEED=42 go test -run 'TestChaos$' ./chaos
//	make chaos-cluster                                              # CHAOS_CLUSTER=long, 5m
package chaos
