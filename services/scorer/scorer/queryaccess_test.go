package scorer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/embedded"
	"github.com/jetqueue/jetqueue/libs/scoring"
)

// scoreImportedConfig is a hand-written NATS configuration that does
// what libs/natsconf does not: it exports jq.api.v1.score from
// jetqueue's account and a namespace's account imports it, shared as
// ingest's API is.
const scoreImportedConfig = `accounts {
  JETQUEUE {
    users: [{user: scorer, password: s}]
    exports: [{service: "jq.api.v1.score"}]
  }
  NS_TEAM_A {
    users: [{user: team-a, password: a}]
    imports: [{service: {account: JETQUEUE, subject: "jq.api.v1.score"}, share: true}]
  }
}
`

// TestScoreAnswersItsOwnAccountOnly: a namespace's submitter that reaches
// jq.api.v1.score through an import gets 403 and no node; a service of
// jetqueue's own account gets the ranking.
func TestScoreAnswersItsOwnAccountOnly(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(scoreImportedConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.StartNATSFrom(filepath.Join(dir, "store"), conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	connect := func(user, pw string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pw))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sc, err := scoring.New(gpuScoring)
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInventory()
	inv.put("k1", scoring.Node{Name: "secret-node", Allocatable: res("cpu", "32", "nvidia.com/gpu", "8")})
	inv.markSynced()
	own := connect("scorer", "s")
	sub, err := (&Querier{Scorer: sc, Inventory: inv}).serve(own)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := own.Flush(); err != nil {
		t.Fatal(err)
	}
	query := []byte(`{"pod":{"requests":{"cpu":"1"}}}`)
	for _, tc := range []struct {
		who    string
		nc     *nats.Conn
		status string
	}{
		{"team-a, through the import", connect("team-a", "a"), "403"},
		{"jetqueue's own account", own, "200"},
	} {
		m, err := tc.nc.Request(SubjectScore, query, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.who, err)
		}
		if got := m.Header.Get("Status"); got != tc.status {
			t.Errorf("%s: status %s %s, want %s", tc.who, got, m.Data, tc.status)
		}
		if leaked := strings.Contains(string(m.Data), "secret-node"); leaked != (tc.status == "200") {
			t.Errorf("%s: answer %s", tc.who, m.Data)
		}
	}
}
