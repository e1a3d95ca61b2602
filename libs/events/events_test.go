package events

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetqueue/jetqueue/libs/scheduler"
)

var validToken = regexp.MustCompile(`^[A-Za-z0-9_~-]+$`)

func TestTokenIsSubjectSafeAndReversible(t *testing.T) {
	for _, s := range []string{"team-a", "my.job.v2", "", "a b*c>d", "ünïcode", "x/y"} {
		tok := Token(s)
		if !validToken.MatchString(tok) {
			t.Errorf("Token(%q) = %q is not a safe subject token", s, tok)
		}
		back, err := ParseToken(tok)
		if err != nil || back != s {
			t.Errorf("ParseToken(Token(%q)) = %q, %v", s, back, err)
		}
	}
}

func TestSubjectsHaveFixedShape(t *testing.T) {
	cases := map[string]int{
		WorkloadSubject("team.a", "job.1"):          5,
		ConfigSubject("ClusterQueue", "", "cq.gpu"): 6,
	}
	for subj, tokens := range cases {
		if got := len(strings.Split(subj, ".")); got != tokens {
			t.Errorf("%s has %d tokens, want %d", subj, got, tokens)
		}
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestEveryTypeRoundTrips encodes one event of each type and parses it
// back from headers and body.
func TestEveryTypeRoundTrips(t *testing.T) {
	ref := WorkloadRef{Namespace: "team-a", Name: "w"}
	samples := map[Type]any{
		ConfigApplied:     &ConfigAppliedData{ConfigRef: ConfigRef{Kind: "ClusterQueue", Name: "cq"}, Object: json.RawMessage(`{"kind":"ClusterQueue"}`)},
		ConfigDeleted:     &ConfigRef{Kind: "LocalQueue", Namespace: "team-a", Name: "lq"},
		WorkloadSubmitted: &WorkloadSubmittedData{WorkloadRef: ref, Workload: json.RawMessage(`{"kind":"Workload"}`), CreatedAt: t0},
		PriorityChanged:   &PriorityChangedData{WorkloadRef: ref, Priority: 7},
		ActiveChanged:     &ActiveChangedData{WorkloadRef: ref, Active: false},
		WorkloadDeleted:   &ref,
		WorkloadExpired:   &ref,
		WorkloadFinished:  &WorkloadFinishedData{WorkloadRef: ref, Succeeded: true},
		PodsReady:         &ref,
		QuotaReserved: &QuotaReservedData{WorkloadRef: ref, Admission: scheduler.Admission{ClusterQueue: "cq",
			PodSets: []scheduler.PodSetAdmission{{Name: "main", Count: 3, Flavors: map[corev1.ResourceName]string{"cpu": "f"},
				Usage: map[corev1.ResourceName]int64{"cpu": 3000}}}}},
		Inadmissible:        &InadmissibleData{WorkloadRef: ref, Reason: scheduler.Reason{Token: scheduler.WaitingForQuota, Flavor: "f", Resource: "cpu", Shortfall: 1000, Message: "m"}},
		PreemptionRequested: &PreemptionRequestedData{WorkloadRef: ref, ClusterQueue: "cq", Victims: []Victim{{WorkloadRef: WorkloadRef{"team-b", "v"}, ClusterQueue: "cq-b", Kind: scheduler.InCohortReclamation}}},
		Evicted:             &EvictedData{WorkloadRef: ref, Reason: "Preempted", Preemptor: &WorkloadRef{"team-b", "p"}, PreemptorCQ: "cq-b", Kind: scheduler.InClusterQueue},
		Requeued:            &RequeuedData{WorkloadRef: ref, Count: 2, Until: t0.Add(time.Minute)},
		Deactivated:         &ref,
		Placed:              &PlacedData{WorkloadRef: ref, PodSets: []PodSetPlacement{{Name: "main", Nodes: []NodeScore{{Node: "n1", FitPlus: 72, Scarce: 100, Total: 172}}}}},
		BatchSkipped:        &BatchSkippedData{Event: "podsready/team-a/w/timeout/1", Type: Evicted, Subject: WorkloadSubject("team-a", "w"), Reason: "moved"},
		BatchClosed:         &BatchClosedData{Batch: "step-3", Missing: 2},
		ShardReleased:       &ShardReleasedData{ClusterQueue: "cq", From: "cohort/a", To: "cohort/b", FromShard: 0, ToShard: 1, AtSeq: 42},
	}
	if len(samples) != len(payloads) {
		t.Fatalf("%d samples for %d types", len(samples), len(payloads))
	}
	for typ, data := range samples {
		t.Run(string(typ), func(t *testing.T) {
			ev := Event{ID: "id-1", Type: typ, Source: "test", Time: t0, Subject: "jq.ev.x", Data: data, Batch: &Batch{ID: "b.1", Size: 3}}
			body, err := ev.Body()
			if err != nil {
				t.Fatal(err)
			}
			h := ev.Headers()
			got, err := Parse(func(k string) string { return h[k] }, body)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(ev, got); d != "" {
				t.Errorf("(-sent +parsed):\n%s", d)
			}
		})
	}
}

func TestParseRefusesBadEvents(t *testing.T) {
	good := Event{ID: "x", Type: PodsReady, Source: "s", Time: t0, Data: &WorkloadRef{"a", "b"}}.Headers()
	cases := []struct {
		name   string
		header map[string]string
		body   string
		want   string
	}{
		{"unknown type", with(good, HeaderType, "io.jetqueue.nope.v1"), `{}`, "unknown ce-type"},
		{"unknown field", good, `{"namespace":"a","name":"b","extra":1}`, `unknown object member name "extra"`},
		{"name in another case", good, `{"Namespace":"a","name":"b"}`, `unknown object member name "Namespace"`},
		{"duplicate member", good, `{"namespace":"a","namespace":"c","name":"b"}`, "duplicate object member"},
		{"text after the payload", good, `{"namespace":"a","name":"b"} {}`, "after top-level value"},
		{"invalid UTF-8", good, "{\"namespace\":\"a\xff\",\"name\":\"b\"}", "UTF-8"},
		{"bad time", with(good, HeaderTime, "yesterday"), `{}`, "ce-time"},
		{"no id", with(good, HeaderID, ""), `{}`, "without ce-id"},
		{"wrong spec version", with(good, HeaderSpecVersion, "0.3"), `{}`, "specversion"},
		{"bad batch", with(good, HeaderBatch, "b/zero"), `{}`, "size"},
	}
	for _, tc := range cases {
		_, err := Parse(func(k string) string { return tc.header[k] }, []byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range h {
		out[a] = b
	}
	out[k] = v
	return out
}

// TestBatchLimits: a batch header is an id of bounded length and charset
// and a positive size; a client's may announce at most MaxBatchSize
// members (JQ-Batch: evil/1000000 would hold decisions for everyone).
func TestBatchLimits(t *testing.T) {
	id64 := strings.Repeat("a", MaxBatchIDLength)
	for _, tc := range []struct {
		v              string
		log, fromUsers bool // accepted in the log, from a client
	}{
		{"b-1/1", true, true},
		{"podsready/1767225600000000000/3", true, true},
		{"nuid.X_y:z/1000", true, true},
		{"evil/1001", true, false},
		{"evil/1000000", true, false},
		{id64 + "/2", true, true},
		{id64 + "a/2", false, false},
		{"ev il/2", false, false},
		{"a\x00b/2", false, false},
		{"é/2", false, false},
		{"/2", false, false},
		{"a/0", false, false},
		{"a/-1", false, false},
		{"a/99999999999999999999999", false, false},
		{"a", false, false},
	} {
		_, err := ParseBatch(tc.v)
		if (err == nil) != tc.log {
			t.Errorf("ParseBatch(%q): err %v, want accepted %v", tc.v, err, tc.log)
		}
		b, err := ParseClientBatch(tc.v)
		if (err == nil) != tc.fromUsers {
			t.Errorf("ParseClientBatch(%q): err %v, want accepted %v", tc.v, err, tc.fromUsers)
		}
		if err == nil && b.String() != tc.v {
			t.Errorf("ParseClientBatch(%q) renders back as %q", tc.v, b.String())
		}
	}
}

func TestShardReleasedValidates(t *testing.T) {
	good := ShardReleasedData{ClusterQueue: "cq", From: "cohort/a", To: "cohort/b", FromShard: 0, ToShard: 1, AtSeq: 42}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*ShardReleasedData){
		"clusterQueue": func(d *ShardReleasedData) { d.ClusterQueue = "" },
		"from, to":     func(d *ShardReleasedData) { d.To = "" },
		"toShard":      func(d *ShardReleasedData) { d.ToShard = 0 },
		"fromShard":    func(d *ShardReleasedData) { d.FromShard = -1 },
		"atSeq":        func(d *ShardReleasedData) { d.AtSeq = 0 },
	} {
		d := good
		bad(&d)
		if err := d.Validate(); err == nil || !strings.HasPrefix(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestDecidedAt(t *testing.T) {
	for _, c := range []struct {
		id     string
		source string
		at     uint64
		ok     bool
	}{
		{DecisionID("admission", 42, 0), SourceAdmission, 42, true},
		{DecisionID("admission-3", 7, 12), SourceAdmission, 7, true},
		{DecisionID("admission", 42, 0), SourceScorer, 0, false},
		{"scorer/admission/992/1", SourceAdmission, 0, false},
		{"admission/batch-closed/b1", SourceAdmission, 0, false},
		{"admission/shard-released/cq/9", SourceAdmission, 0, false},
		{"admission-x/5/0", SourceAdmission, 0, false},
		{"admission/0/0", SourceAdmission, 0, false},
		{"admission/5/x", SourceAdmission, 0, false},
		{"rec-5", SourceAdmission, 0, false},
	} {
		at, ok := DecidedAt(Event{ID: c.id, Source: c.source})
		if at != c.at || ok != c.ok {
			t.Errorf("DecidedAt(%q from %s) = %d, %v; want %d, %v", c.id, c.source, at, ok, c.at, c.ok)
		}
		if _, i, ok := DecisionOf(Event{ID: c.id, Source: c.source}); ok && fmt.Sprintf("/%d/%d", at, i) != c.id[strings.Index(c.id, "/"):] {
			t.Errorf("DecisionOf(%q): index %d", c.id, i)
		}
	}
}
