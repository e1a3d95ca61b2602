package deploy

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// natsConfigs are the copies of the shipped NATS accounts: compose mounts
// deploy/nats, and kustomize reads only files under its own root.
var natsConfigs = []string{"nats/jetqueue.conf", "k8s/base/jetqueue.conf"}

// TestNATSConfig: the shipped NATS accounts are natsconf's rendering with
// passwords from the environment (go test -run TestNATSConfig -update .
// rewrites them).
func TestNATSConfig(t *testing.T) {
	want, err := natsconf.Render(natsconf.EnvPasswords(natsconf.ShippedNamespaces))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range natsConfigs {
		if *update {
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test -run TestNATSConfig -update . in deploy/)", err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s is stale; run go test -run TestNATSConfig -update . in deploy/ (-want +file):\n%s", file, diff)
		}
	}
}
