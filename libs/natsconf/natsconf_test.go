package natsconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
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
