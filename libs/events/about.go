package events

import "strings"

// About is what an event is about, read from its subject alone: a
// workload (WorkloadSubject, PlacedSubject) or a configuration object
// (ConfigSubject). Readers that only route or filter events (the
// console's push stream) need no decoding of the payload to know it, and
// a workload event type added later is covered without a case of its
// own.
type About struct {
	// Config says the subject is a configuration object's; Kind is then
	// its kind.
	Config                bool
	Kind, Namespace, Name string
}

// AboutSubject reverses WorkloadSubject, PlacedSubject and ConfigSubject;
// any other subject (batches, shard handovers) is about nothing: false.
func AboutSubject(subject string) (About, bool) {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return About{}, false
	}
	toks := strings.Split(rest, ".")
	names := make([]string, 0, 3)
	for _, tok := range toks[1:] {
		s, err := ParseToken(tok)
		if err != nil {
			return About{}, false
		}
		names = append(names, s)
	}
	switch {
	case (toks[0] == "wl" || toks[0] == "placed") && len(names) == 2:
		return About{Namespace: names[0], Name: names[1]}, true
	case toks[0] == "cfg" && len(names) == 3:
		return About{Config: true, Kind: names[0], Namespace: names[1], Name: names[2]}, true
	}
	return About{}, false
}
