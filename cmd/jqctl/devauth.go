package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/jetqueue/jetqueue/libs/natsconf"
	"github.com/jetqueue/jetqueue/libs/secret"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// devAdmin is the identity `jqctl dev` makes for its own user: a member of
// system:masters, which every policy lets do everything, as in Kubernetes.
const (
	devAdmin   = "jetqueue-dev-admin"
	devContext = "jetqueue-dev"
)

// devTokens writes the token file ingest reads under `jqctl dev`: the
// admin's token, made once and kept under the data directory (mode 0600),
// after the lines of the team's own --token-auth-file if one is given, so
// a team can try its real users and the admin side by side. It returns the
// file and the admin's token.
func devTokens(dir, teamFile string) (string, string, error) {
	authDir := filepath.Join(dir, "auth")
	if err := os.MkdirAll(authDir, 0o700); err != nil {
		return "", "", err
	}
	token, err := secret.Kept(filepath.Join(authDir, "admin.token"), 32)
	if err != nil {
		return "", "", err
	}
	var csv bytes.Buffer
	if teamFile != "" {
		team, err := os.ReadFile(teamFile)
		if err != nil {
			return "", "", fmt.Errorf("--token-auth-file: %w", err)
		}
		csv.Write(team)
		if len(team) > 0 && team[len(team)-1] != '\n' {
			csv.WriteByte('\n')
		}
	}
	fmt.Fprintf(&csv, "%s,%s,%s,\"system:masters\"\n", token, devAdmin, devAdmin)
	file := filepath.Join(authDir, "tokens.csv")
	if err := os.WriteFile(file, csv.Bytes(), 0o600); err != nil {
		return "", "", err
	}
	return file, string(token), nil
}

// writeDevContext makes the jqctl context jetqueue-dev (server and admin
// token) the current one of jqctl's config, and returns the config's path.
func writeDevContext(server, token string) (string, error) {
	var where string
	err := editConfig(func(cfg *clientcmdapi.Config, path string) error {
		where = path
		cluster := clientcmdapi.NewCluster()
		cluster.Server = server
		cfg.Clusters[devContext] = cluster
		user := clientcmdapi.NewAuthInfo()
		user.Token = token
		cfg.AuthInfos[devAdmin] = user
		ctx := clientcmdapi.NewContext()
		ctx.Cluster, ctx.AuthInfo = devContext, devAdmin
		cfg.Contexts[devContext] = ctx
		cfg.CurrentContext = devContext
		return nil
	})
	return where, err
}

// devSubmitterRole is the ClusterRole dev binds each example namespace's
// durable submitter to: roles.yaml's jetqueue-submitter under a name of
// dev's own, so that a team policy that already holds roles.yaml's
// ClusterRoles does not define it twice.
const devSubmitterRole = "jqctl-dev-submitter"

// devPolicy is the policy file ingest reads under `jqctl dev`. Without a
// team policy there is none: every identified caller may do everything,
// each namespace's durable submitter included. With one, durable
// submissions act as system:jetqueue:submit:<namespace> and the team's
// policy would have to bind them; dev writes <dir>/auth/policy.yaml, the
// team's policy followed by a binding of each example namespace's
// submitter (the namespaces of dev's NATS accounts) to create workloads
// and Jobs in that namespace and nothing else, so that dev's durable
// door keeps working whatever the team's policy says of its users.
func devPolicy(dir, teamFile string) (string, error) {
	if teamFile == "" {
		return "", nil
	}
	team, err := os.ReadFile(teamFile)
	if err != nil {
		return "", fmt.Errorf("--authorization-policy-file: %w", err)
	}
	var b bytes.Buffer
	b.Write(team)
	fmt.Fprintf(&b, `
---
# Added by jqctl dev: each example namespace's durable submissions
# (JQ_SUBMIT) may create workloads and Jobs in that namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %s}
rules:
  - {apiGroups: [kueue.x-k8s.io], resources: [workloads], verbs: [create]}
  - {apiGroups: [batch], resources: [jobs], verbs: [create]}
`, devSubmitterRole)
	for _, ns := range natsconf.ShippedNamespaces {
		fmt.Fprintf(&b, `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s, namespace: %[2]s}
subjects: [{kind: User, name: %[3]q}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
`, devSubmitterRole, ns, ingest.SubmitterName(ns))
	}
	authDir := filepath.Join(dir, "auth")
	if err := os.MkdirAll(authDir, 0o700); err != nil {
		return "", err
	}
	file := filepath.Join(authDir, "policy.yaml")
	return file, os.WriteFile(file, b.Bytes(), 0o600)
}
