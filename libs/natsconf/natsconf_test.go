package natsconf

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/embedded"
)

// TestRenderedConfigLoads: what Render writes is a configuration
// nats-server accepts, with an environment reference resolved.
func TestRenderedConfigLoads(t *testing.T) {
	for _, ns := range ShippedNamespaces {
		t.Setenv(PasswordEnv(ns), "pw-"+ns)
	}
	for _, u := range append(append([]string{}, Services...), NodesUser) {
		t.Setenv(PasswordEnv(u), "pw-"+u)
	}
	text, err := Render(EnvPasswords(ShippedNamespaces))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jetqueue.conf")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var found bool
	for _, u := range opts.Users {
		if u.Username == "ingest" {
			found = u.Password == "pw-ingest"
		}
	}
	if !found {
		t.Errorf("ingest's password not resolved from %s", PasswordEnv("ingest"))
	}
}

func TestParseRequester(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Requester
		ok   bool
		err  bool
	}{
		{"", Requester{}, false, false},
		{`{"acc":"NS_TEAM_A","user":"team-a","rtt":1}`, Requester{Account: "NS_TEAM_A", User: "team-a"}, true, false},
		{`{"acc":"A","user":"UABC","name_tag":"alice"}`, Requester{Account: "A", User: "UABC", Name: "alice"}, true, false},
		{`{"acc":"A"}`, Requester{Account: "A"}, true, true},
		{`{"user":"x"}`, Requester{}, true, true},
		{`not json`, Requester{}, true, true},
	} {
		got, ok, err := ParseRequester(tc.in)
		if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("ParseRequester(%q) = %+v, %v, %v", tc.in, got, ok, err)
		}
	}
}

// TestNamespaceReachesIngestsAPIOnly runs a rendered configuration: a
// namespace's submitter reaches ingest's request subjects (stamped with
// its account and user), but not the scorer's jq.api.v1.score, which
// stays inside jetqueue's account.
func TestNamespaceReachesIngestsAPIOnly(t *testing.T) {
	c, pw, err := Passwords(filepath.Join(t.TempDir(), "auth"), []string{"team-a"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "jetqueue.conf")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.StartNATSFrom(filepath.Join(dir, "store"), file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	connect := func(user string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pw[user]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	// The services answer every request subject, as ingest and the
	// scorer do, naming who asked.
	svc := connect("ingest")
	for _, subject := range []string{"jq.api.v1.apply", "jq.api.v1.workloads.submit", "jq.api.v1.score"} {
		if _, err := svc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(m.Header.Get(RequestInfoHeader))) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	team := connect("team-a")
	for _, subject := range []string{"jq.api.v1.apply", "jq.api.v1.workloads.submit"} {
		m, err := team.Request(subject, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if r, _, err := ParseRequester(string(m.Data)); err != nil || r.Account != AccountOf("team-a") || r.User != "team-a" {
			t.Errorf("%s reached ingest as %+v (%v), want team-a of %s", subject, r, err, AccountOf("team-a"))
		}
	}
	if m, err := team.Request("jq.api.v1.score", nil, 2*time.Second); err == nil {
		t.Errorf("a namespace's submitter reached jq.api.v1.score: %q", m.Data)
	}
}
