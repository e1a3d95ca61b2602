package deploy

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// ConfigurationDoc renders docs/configuration.md: every binary's flags with
// the environment variable behind each and its default.
func ConfigurationDoc() []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from the services' RegisterFlags by the deploy module's tests:
     cd deploy && go test -run TestConfigurationDoc -update . rewrites it. -->

Every service flag can also be set through the environment: ` + "`JQ_`" + ` and the
flag name in upper case with dashes as underscores (` + "`--nats-url`" + ` →
` + "`JQ_NATS_URL`" + `). A flag given on the command line wins over the variable; a
variable whose value does not parse stops the service with an error naming
it. Durations are Go durations (` + "`5s`, `1m30s`" + `).

Each service binary also takes one command, ` + "`healthcheck`" + `
(` + "`ingest healthcheck`" + `): it reads the same flags and environment, requests
` + "`/readyz`" + ` on ` + "`--admin-addr`" + ` (on 127.0.0.1 when the address has no host, as in
` + "`:9090`" + `) and exits 0 when the service is ready, 1 otherwise. The images use
it as their health check, since they have no shell or curl.

A service does not exit on a fault (NATS or PostgreSQL restarting, a request
timing out): it logs the error, turns ` + "`/readyz`" + ` off, and starts its work
again in the same process after a backoff of 100ms doubling up to 10s
(counted by ` + "`jetqueue_service_restarts_total`" + `). Only a configuration it can
never run with (a missing ` + "`--database-url`" + `, a bad scoring configuration, no
authentication configured) stops it with exit status 1.

`)
	b.WriteString("| binary | what it does |\n| --- | --- |\n")
	for _, s := range Services {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", s.Name, s.Name, s.Summary)
	}
	b.WriteString("| [`jqctl`](#jqctl) | the command line |\n\n")

	b.WriteString("## Every service\n\nDeclared by `libs/service` (`service.RegisterFlags`).\n\n")
	writeTable(&b, commonFlags())

	for _, s := range Services {
		fmt.Fprintf(&b, "\n## %s\n\n%s.", s.Name, upperFirst(s.Summary))
		if s.LeaseHolder {
			b.WriteString(" Replicas are hot standbys: the one holding the lease `--shard` acts.")
		}
		b.WriteString(" Besides the flags above:\n\n")
		var own []Flag
		for _, f := range s.Flags() {
			if !f.Common {
				own = append(own, f)
			}
		}
		writeTable(&b, own)
		if len(s.ExtraEnv) > 0 {
			fmt.Fprintf(&b, "\nAlso read: %s.\n", codeList(s.ExtraEnv))
		}
	}

	b.WriteString("\n## jqctl\n\n`jqctl --help` lists its commands and flags. It reads these variables:\n\n")
	b.WriteString("| variable | what |\n| --- | --- |\n")
	keys := make([]string, 0, len(JQCTLEnv))
	for k := range JQCTLEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| `%s` | %s |\n", k, cell(JQCTLEnv[k]))
	}
	return b.Bytes()
}

func commonFlags() []Flag {
	var out []Flag
	for _, f := range Services[0].Flags() {
		if f.Common {
			out = append(out, f)
		}
	}
	return out
}

func writeTable(b *bytes.Buffer, flags []Flag) {
	b.WriteString("| flag | environment | default | description |\n| --- | --- | --- | --- |\n")
	for _, f := range flags {
		def := "(none)"
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(b, "| `--%s` | `%s` | %s | %s |\n", f.Name, f.Env, def, cell(f.Usage))
	}
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func codeList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, ", ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
