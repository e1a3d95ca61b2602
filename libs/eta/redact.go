package eta

import "slices"

// Redacted is e as a caller sees it who may read the workloads of the
// namespaces visible says yes to. The finishes it waits on of workloads
// of other namespaces are counted, not named, and carry neither their
// time nor their run time: those would tell another team's expected run
// times. The estimate's own time stays: it is the caller's answer.
func (e *Estimate) Redacted(visible func(namespace string) bool) *Estimate {
	if e == nil {
		return nil
	}
	out := *e
	out.After = slices.Clone(e.After)
	changed := false
	for i, f := range out.After {
		if !f.Hidden && !visible(f.Namespace) {
			out.After[i] = Finish{Hidden: true}
			changed = true
		}
	}
	if changed && out.WaitSeconds != nil {
		out.Assumption = Assumption(out.After, out.AfterCount, *out.WaitSeconds)
	}
	return &out
}
