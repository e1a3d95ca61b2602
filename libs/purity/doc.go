// Package purity holds the tests that keep the decision core pure, and
// states the rule they enforce:
//
//   - No package of the core imports net, os, syscall, database/sql,
//     net/rpc, net/http or os/exec, and neither does any jetqueue package
//     it depends on. Third-party packages in its graph may, only if they
//     are the Kubernetes type libraries (and what those link) listed in
//     typeLibraries: the core uses their types and validation, never
//     their I/O.
//   - NATS, pgx and zap appear nowhere in the core's dependency graph.
//   - No non-test source of a core package refers to time.Now,
//     time.Since, time.Until, time.Sleep, time.After, time.AfterFunc,
//     time.Tick, time.NewTimer or time.NewTicker: time is passed in.
//     Importing time with a dot counts as such a reference, since the
//     bare names cannot be told from the package's own.
//
// testdata/ holds one probe package per banned import and per banned
// call; a test proves the rule catches each.
package purity
