// Package deploy holds what the deployment files are checked against: the
// binaries the images carry and the flags (and so the JQ_ environment
// variables) each accepts. Its tests load deploy/compose, render deploy/k8s
// and parse the Dockerfile with the tools that consume them (compose-go,
// kustomize, client-go's strict decoder, BuildKit's parser) and hold them to
// the binaries' real flags; docs/configuration.md is rendered from the same
// flag sets.
package deploy

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

// Service is one service binary: its name (also its image target, its
// Deployment and its compose service) and how its main declares its flags.
type Service struct {
	Name string
	// Summary is one line for the flag reference.
	Summary string
	// Register declares the service's own flags (without service.RegisterFlags).
	Register func(fs *flag.FlagSet)
	// LeaseHolder: replicas follow the log and one per shard acts under a
	// JetStream KV lease; the others are hot standbys.
	LeaseHolder bool
	// ExtraEnv are variables the binary reads besides JQ_<FLAG>.
	ExtraEnv []string
}

// Services are the five service binaries, in pipeline order.
var Services = []Service{
	{Name: "ingest", Summary: "the HTTP and NATS API, durable submissions and the PostgreSQL projector",
		Register: func(fs *flag.FlagSet) { ingest.RegisterFlags(fs, &ingest.Config{}) }, ExtraEnv: []string{"DATABASE_URL"}},
	{Name: "admission", Summary: "follows JQ_EVENTS and runs the scheduling core under a lease",
		Register: func(fs *flag.FlagSet) { admission.RegisterFlags(fs, &admission.Config{}) }, LeaseHolder: true},
	{Name: "preemptor", Summary: "carries out the preemptions admission decides, under a lease",
		Register: func(fs *flag.FlagSet) { preemptor.RegisterFlags(fs, &preemptor.Config{}) }, LeaseHolder: true},
	{Name: "podsready", Summary: "waitForPodsReady: timeouts, requeues and deactivation, under a lease",
		Register: func(fs *flag.FlagSet) { podsready.RegisterFlags(fs, &podsready.Config{}) }, LeaseHolder: true},
	{Name: "scorer", Summary: "ranks nodes for admitted workloads and answers ranking queries",
		Register: func(fs *flag.FlagSet) { scorer.RegisterFlags(fs, &scorer.Config{}) }},
}

// JQCTLEnv are the environment variables jqctl reads (its flags live in a
// main package, so they are listed here; cmd/jqctl's verbs.go and nodes.go
// declare them).
var JQCTLEnv = map[string]string{
	"JQ_SERVER":   "--server: the jetqueue API server (default http://127.0.0.1:8080)",
	"JQ_NATS_URL": "--nats-url of `jqctl nodes put`: the NATS server (default nats://127.0.0.1:4222)",
	// jqctl nodes put's NATS identity, named as the services name it.
	"JQ_NATS_CREDS":    "--nats-creds of `jqctl nodes put`: a NATS JWT credentials file",
	"JQ_NATS_NKEY":     "--nats-nkey of `jqctl nodes put`: a file holding an nkey user seed",
	"JQ_NATS_USER":     "--nats-user of `jqctl nodes put`: the NATS user (the shipped configuration's is `nodes`)",
	"JQ_NATS_PASSWORD": "--nats-password of `jqctl nodes put`: the NATS user's password",
	"JQ_NATS_CA":       "--nats-ca of `jqctl nodes put`: CAs of the NATS server's certificate",
	"JQ_NATS_CERT":     "--nats-cert of `jqctl nodes put`: client certificate for NATS",
	"JQ_NATS_KEY":      "--nats-key of `jqctl nodes put`: the key of --nats-cert",
}

// ServiceByName finds a service.
func ServiceByName(name string) (Service, bool) {
	for _, s := range Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// FlagSet is the service's complete flag set, as its main builds it: the
// common flags of libs/service, then its own.
func (s Service) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	service.RegisterFlags(fs, &service.Options{})
	s.Register(fs)
	return fs
}

// Env is every environment variable the service reads, mapped to its flag
// name (empty for ExtraEnv).
func (s Service) Env() map[string]string {
	env := map[string]string{}
	s.FlagSet().VisitAll(func(f *flag.Flag) { env[service.EnvName(f.Name)] = f.Name })
	for _, e := range s.ExtraEnv {
		env[e] = ""
	}
	return env
}

// Flag is one row of the flag reference.
type Flag struct {
	Name, Env, Default, Usage string
	// Common: declared by libs/service for every service.
	Common bool
}

// Flags lists the service's flags sorted by name. Defaults that depend on
// the machine (the hostname and pid of --instance) are shown symbolically.
func (s Service) Flags() []Flag {
	common := map[string]bool{}
	cfs := flag.NewFlagSet("", flag.ContinueOnError)
	service.RegisterFlags(cfs, &service.Options{})
	cfs.VisitAll(func(f *flag.Flag) { common[f.Name] = true })

	host, _ := os.Hostname()
	instance := fmt.Sprintf("%s-%d", host, os.Getpid())
	var out []Flag
	s.FlagSet().VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == instance {
			def = "<hostname>-<pid>"
		}
		out = append(out, Flag{Name: f.Name, Env: service.EnvName(f.Name), Default: def, Usage: f.Usage, Common: common[f.Name]})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
