// Package scoring ranks nodes for one pod the way Koordinator's
// NodeResourcesFitPlus and ScarceResourceAvoidance score plugins do
// (shared/reference/scorer-formulas.md), with jetqueue's deterministic
// tie-break, and places a podSet's pods greedily on the ranked nodes.
//
//	Config ──New──▶ Scorer
//	                  │
//	Pod, []Node ──▶ Filter ──▶ Score (fitPlus, scarce) ──▶ Rank ──▶ Place
//	                (labels,     integer arithmetic,        total desc,
//	                 taints,     every division floors      name asc
//	                 fit)
//
// Everything is a pure function of its arguments: no I/O, no clock, no
// randomness, and the inputs are never modified. Amounts are integers in
// Kueue's units (cpu millicores, everything else Quantity.Value rounded up).
//
// Rank scores every node it is given, feasible or not, because the formulas
// are defined for both (a clamp, a 0 for a missing resource) and the
// conformance vectors pin them; Place is the pipeline that filters first.
package scoring
