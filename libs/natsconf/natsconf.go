// Package natsconf writes jetqueue's NATS server configuration: which
// accounts exist, who may connect, and what each may publish and
// subscribe. deploy/nats/jetqueue.conf is its rendering with passwords
// taken from the environment; `jqctl dev` and the tests render it with
// fresh secrets.
//
//	account JETQUEUE (JetStream)                account of a namespace (NS_TEAM_A …)
//	  ingest, admission, preemptor,               submitters of that namespace
//	  podsready, scorer: the services               publish jq.submit.<ns>.>   ──service import──▶ JQ_SUBMIT
//	  nodes: `jqctl nodes put` (JQ_NODES only)      request ingest's API       ──service import, share──▶ ingest
//	  exports jq.submit.>, ingest's API             read jq.rejected.<ns>.>    ◀──stream import── ingest
//	  (jq.api.v1.apply, jq.api.v1.workloads.>),
//	  jq.rejected.>
//
// The accounts are the boundary: JQ_EVENTS, the KV buckets (leases,
// progress, clock, nodes) and the JetStream API live in JETQUEUE, which
// exports only the front doors, so no user of another account can
// publish an event, write a bucket or touch a stream. Inside JETQUEUE,
// only ingest may read JQ_SUBMIT, and nobody may send API requests: a
// request to ingest's API reaches it only through a service import, which
// makes the server stamp Nats-Request-Info with the requester's account
// and user (replacing whatever the client put there), so ingest knows who
// asks. The scorer's jq.api.v1.score is not exported: it answers anyone
// who reaches it with the node inventory, and has no RBAC of its own, so
// it stays inside JETQUEUE (and refuses a request from another account
// should a hand-written configuration export it).
package natsconf

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Account is the account of jetqueue's services and its event log.
const Account = "JETQUEUE"

// SystemAccount is the NATS system account.
const SystemAccount = "SYS"

// Services are the service users of Account, one per service.
var Services = []string{"ingest", "admission", "preemptor", "podsready", "scorer"}

// NodesUser may write JQ_NODES (jqctl nodes put), nothing else.
const NodesUser = "nodes"

// Secret is how one user authenticates: a password (a literal, or a
// reference "$VAR" the server resolves from its environment) or an nkey
// public key. Exactly one is set.
type Secret struct {
	Password string
	NKey     string
}

// Submitter is a user of a namespace's account.
type Submitter struct {
	Name   string
	Secret Secret
}

// Namespace is one namespace's account: its submitters publish only on
// jq.submit.<Name>.> and read only jq.rejected.<Name>.>.
type Namespace struct {
	Name       string
	Submitters []Submitter
}

// Config is what Render writes.
type Config struct {
	// Services maps each of Services (and NodesUser) to its secret.
	Services map[string]Secret
	// Namespaces are the namespaces whose submitters reach NATS.
	Namespaces []Namespace
}

// namespaceRE is a Kubernetes namespace (a DNS-1123 label). A namespace
// stands raw in a subject token and an account name, which its alphabet
// allows.
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// AccountOf is the account of a namespace's submitters: TEAM_A for team-a.
func AccountOf(namespace string) string {
	return "NS_" + strings.ToUpper(strings.ReplaceAll(namespace, "-", "_"))
}

// Render writes the server configuration of c. It holds accounts, users
// and the system account, and leaves listeners, TLS and JetStream's store
// to the file that includes it or to the command line.
func Render(c Config) (string, error) {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("accounts {\n")
	fmt.Fprintf(&b, "  %s {\n    jetstream: enabled\n    users: [\n", Account)
	for _, name := range append(append([]string{}, Services...), NodesUser) {
		sec, ok := c.Services[name]
		if !ok {
			return "", fmt.Errorf("no secret for the %s user", name)
		}
		u, err := user(name, sec, permissionsOf(name))
		if err != nil {
			return "", err
		}
		b.WriteString("      " + u + "\n")
	}
	b.WriteString("    ]\n")
	b.WriteString(`    # The front doors, and nothing else: the event log, the buckets, the
    # JetStream API and the scorer's jq.api.v1.score (the node inventory,
    # which no RBAC guards) stay inside this account.
    exports: [
      {service: "jq.submit.>"}
`)
	for _, subject := range IngestAPI {
		fmt.Fprintf(&b, "      {service: %q}\n", subject)
	}
	b.WriteString(`      {stream: "jq.rejected.>"}
    ]
  }
`)
	nss := append([]Namespace(nil), c.Namespaces...)
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	for _, ns := range nss {
		if !namespaceRE.MatchString(ns.Name) {
			return "", fmt.Errorf("namespace %q: not a DNS-1123 label", ns.Name)
		}
		fmt.Fprintf(&b, "  %s {\n    users: [\n", AccountOf(ns.Name))
		for _, s := range ns.Submitters {
			u, err := user(s.Name, s.Secret, submitterPermissions(ns.Name))
			if err != nil {
				return "", err
			}
			b.WriteString("      " + u + "\n")
		}
		fmt.Fprintf(&b, `    ]
    imports: [
      {service: {account: %[1]s, subject: "jq.submit.%[2]s.>"}}
      # share: the server stamps each request with Nats-Request-Info
      # (account and user), which is how ingest knows who asks.
`, Account, ns.Name)
		for _, subject := range IngestAPI {
			fmt.Fprintf(&b, "      {service: {account: %s, subject: %q}, share: true}\n", Account, subject)
		}
		fmt.Fprintf(&b, `      {stream: {account: %s, subject: "jq.rejected.%s.>"}}
    ]
  }
`, Account, ns.Name)
	}
	fmt.Fprintf(&b, "  %s {}\n}\nsystem_account: %s\n", SystemAccount, SystemAccount)
	return b.String(), nil
}

const header = `# jetqueue's NATS accounts and users (rendered by libs/natsconf; see
# docs/security.md). Nobody connects without a user: there is no
# no_auth_user.
`

// user renders one user entry.
func user(name string, s Secret, perms string) (string, error) {
	var cred string
	switch {
	case s.Password != "" && s.NKey != "", s.Password == "" && s.NKey == "":
		return "", fmt.Errorf("user %s: want a password or an nkey", name)
	case s.NKey != "":
		cred = "nkey: " + strconv.Quote(s.NKey)
	case strings.HasPrefix(s.Password, "$"):
		// An environment reference stays unquoted, or the server would
		// take it literally.
		cred = "user: " + strconv.Quote(name) + ", password: " + s.Password
	default:
		cred = "user: " + strconv.Quote(name) + ", password: " + strconv.Quote(s.Password)
	}
	return "{" + cred + ", permissions: " + perms + "}", nil
}

// submitDeny is what no service but ingest may do to JQ_SUBMIT: read it
// (core subscriptions on its subjects, consumers, direct and message
// gets, acks) or change it (purge, delete, update). The JetStream API
// names the stream as the 5th or 6th token.
var submitDeny = []string{
	"jq.submit.>",
	"$JS.API.*.*.JQ_SUBMIT", "$JS.API.*.*.JQ_SUBMIT.>",
	"$JS.API.*.*.*.JQ_SUBMIT", "$JS.API.*.*.*.JQ_SUBMIT.>",
	"$JS.ACK.JQ_SUBMIT.>",
}

// permissionsOf a user of Account. Services may use the JetStream API and
// the buckets; none may send an API request (jq.api.v1.>: those come from
// other accounts through the import, stamped with their sender), and only
// ingest may touch JQ_SUBMIT.
func permissionsOf(name string) string {
	if name == NodesUser {
		return perms([]string{"$JS.API.INFO", "$JS.API.STREAM.INFO.KV_JQ_NODES", "$JS.API.STREAM.CREATE.KV_JQ_NODES",
			"$JS.API.DIRECT.GET.KV_JQ_NODES.>", "$JS.API.STREAM.MSG.GET.KV_JQ_NODES", "$KV.JQ_NODES.>"}, nil,
			[]string{"_INBOX.>"}, nil)
	}
	pubDeny := []string{"jq.api.v1.>"}
	var subDeny []string
	if name != "ingest" {
		pubDeny = append(pubDeny, submitDeny...)
		subDeny = []string{"jq.submit.>"}
	}
	return perms(nil, pubDeny, nil, subDeny)
}

// IngestAPI are the request subjects of ingest's NATS API, the ones a
// namespace's account imports. Not jq.api.v1.> as a whole: the scorer's
// jq.api.v1.score is there too, and it authorizes nobody.
var IngestAPI = []string{"jq.api.v1.apply", "jq.api.v1.workloads.>"}

// submitterPermissions: submit to its own namespace, call ingest's API
// (which authorizes by identity), read its own namespace's rejections and
// the replies to its requests.
func submitterPermissions(ns string) string {
	return perms(append([]string{"jq.submit." + ns + ".>"}, IngestAPI...), nil,
		[]string{"_INBOX.>", "jq.rejected." + ns + ".>"}, nil)
}

func perms(pubAllow, pubDeny, subAllow, subDeny []string) string {
	side := func(allow, deny []string) string {
		var parts []string
		if allow != nil {
			parts = append(parts, "allow: "+list(allow))
		}
		if deny != nil {
			parts = append(parts, "deny: "+list(deny))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	var parts []string
	if pubAllow != nil || pubDeny != nil {
		parts = append(parts, "publish: "+side(pubAllow, pubDeny))
	}
	if subAllow != nil || subDeny != nil {
		parts = append(parts, "subscribe: "+side(subAllow, subDeny))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
