package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/jetqueue/jetqueue/libs/secret"
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
