package events

import "testing"

// TestAboutSubject: every subject a workload or configuration event is
// published on names what it is about, empty names and dots included;
// the others name nothing.
func TestAboutSubject(t *testing.T) {
	for _, tc := range []struct {
		subject string
		want    About
		ok      bool
	}{
		{WorkloadSubject("team-a", "w.1"), About{Namespace: "team-a", Name: "w.1"}, true},
		{PlacedSubject("ns", "p"), About{Namespace: "ns", Name: "p"}, true},
		{ConfigSubject("ClusterQueue", "", "cq"), About{Config: true, Kind: "ClusterQueue", Name: "cq"}, true},
		{ConfigSubject("LocalQueue", "ns", "lq"), About{Config: true, Kind: "LocalQueue", Namespace: "ns", Name: "lq"}, true},
		{BatchSubject, About{}, false},
		{SubjectRoot + ".wl.only-one", About{}, false},
		{SubjectRoot + ".wl.!!.x", About{}, false},
		{"other.wl.a.b", About{}, false},
	} {
		got, ok := AboutSubject(tc.subject)
		if got != tc.want || ok != tc.ok {
			t.Errorf("AboutSubject(%q) = %+v, %v; want %+v, %v", tc.subject, got, ok, tc.want, tc.ok)
		}
	}
}
