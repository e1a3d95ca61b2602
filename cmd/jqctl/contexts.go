package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// jqctl's configuration is a kubeconfig: clusters (server, CA), users
// (token, client certificate and key) and contexts pairing them, with a
// current-context. It lives at $JQCTL_CONFIG, else
// $XDG_CONFIG_HOME/jqctl/config, else ~/.config/jqctl/config. Without
// one, jqctl talks to JQ_SERVER or http://127.0.0.1:8080 without
// credentials, as it always has.

const defaultServerURL = "http://127.0.0.1:8080"

// isLoopback says whether host is this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// configPath is where jqctl's kubeconfig lives.
func configPath() (string, error) {
	if p := os.Getenv("JQCTL_CONFIG"); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "jqctl", "config"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for jqctl's config (set JQCTL_CONFIG): %w", err)
	}
	return filepath.Join(home, ".config", "jqctl", "config"), nil
}

// loadConfig reads jqctl's config; an absent file is an empty config.
func loadConfig() (*clientcmdapi.Config, string, error) {
	path, err := configPath()
	if err != nil {
		return nil, "", err
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return clientcmdapi.NewConfig(), path, nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, path, nil
}

// newClient is the HTTP client of the command's context: --server (or
// JQ_SERVER) and --token override the context's server and token; without
// a context, the server is JQ_SERVER or http://127.0.0.1:8080.
func newClient(cmd *cobra.Command) *client {
	c, err := contextClient(cmd)
	if err != nil {
		// Reported by the client's first request.
		return &client{err: err}
	}
	return c
}

func contextClient(cmd *cobra.Command) (*client, error) {
	flags := cmd.Flags()
	server, _ := flags.GetString("server")
	serverSet := flags.Changed("server") || os.Getenv("JQ_SERVER") != ""
	token, _ := flags.GetString("token")
	contextName, _ := flags.GetString("context")
	cfg, path, err := loadConfig()
	if err != nil {
		return nil, err
	}
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	rc := &rest.Config{}
	if contextName != "" {
		if _, ok := cfg.Contexts[contextName]; !ok {
			return nil, fmt.Errorf("context %q is not in %s", contextName, path)
		}
		rc, err = clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %q of %s: %w", contextName, path, err)
		}
	}
	if serverSet || rc.Host == "" {
		rc.Host = server
	}
	if rc.Host == "" {
		rc.Host = defaultServerURL
	}
	// Credentials travel over TLS, or to this machine (jqctl dev serves
	// plain HTTP on loopback); clientcmd already leaves them out of a
	// plain-HTTP context, and a --server override gets the same rule.
	u, err := url.Parse(rc.Host)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", rc.Host, err)
	}
	if u.Scheme != "https" {
		rc.BearerToken, rc.BearerTokenFile, rc.TLSClientConfig = "", "", rest.TLSClientConfig{}
		if ctx := cfg.Contexts[contextName]; ctx != nil && isLoopback(u.Hostname()) {
			if ai := cfg.AuthInfos[ctx.AuthInfo]; ai != nil {
				rc.BearerToken, rc.BearerTokenFile = ai.Token, ai.TokenFile
			}
		}
	}
	if token != "" {
		// Given on the command line: the caller chose where it goes.
		rc.BearerToken, rc.BearerTokenFile = token, ""
	}
	// A watch streams for as long as it is followed: its client has no
	// overall timeout.
	wc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	rc.Timeout = 60 * time.Second
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	c := &client{server: rc.Host, http: hc, watch: wc, seqFile: path + ".seq"}
	if ctx := cfg.Contexts[contextName]; ctx != nil {
		c.namespace = ctx.Namespace
	}
	return c, nil
}

func configCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage jqctl's contexts (a kubeconfig at $JQCTL_CONFIG or ~/.config/jqctl/config)",
	}
	cmd.AddCommand(
		&cobra.Command{
			Use: "get-contexts", Short: "List the contexts; * marks the current one", Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				cfg, _, err := loadConfig()
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(stdout, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "CURRENT\tNAME\tCLUSTER\tSERVER\tUSER")
				names := make([]string, 0, len(cfg.Contexts))
				for n := range cfg.Contexts {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					c, cur, server := cfg.Contexts[n], "", ""
					if n == cfg.CurrentContext {
						cur = "*"
					}
					if cl := cfg.Clusters[c.Cluster]; cl != nil {
						server = cl.Server
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, n, c.Cluster, server, c.AuthInfo)
				}
				return tw.Flush()
			},
		},
		&cobra.Command{
			Use: "current-context", Short: "Print the current context", Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				cfg, path, err := loadConfig()
				if err != nil {
					return err
				}
				if cfg.CurrentContext == "" {
					return fmt.Errorf("no current context in %s", path)
				}
				fmt.Fprintln(stdout, cfg.CurrentContext)
				return nil
			},
		},
		&cobra.Command{
			Use: "use-context NAME", Short: "Make NAME the current context", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				return editConfig(func(cfg *clientcmdapi.Config, path string) error {
					if _, ok := cfg.Contexts[args[0]]; !ok {
						return fmt.Errorf("context %q is not in %s", args[0], path)
					}
					cfg.CurrentContext = args[0]
					fmt.Fprintf(stdout, "Switched to context %q.\n", args[0])
					return nil
				})
			},
		},
		setClusterCmd(stdout), setCredentialsCmd(stdout), setContextCmd(stdout),
	)
	return cmd
}

// editConfig reads the config, changes it and writes it back, private to
// its owner (it may hold tokens).
func editConfig(change func(*clientcmdapi.Config, string) error) error {
	cfg, path, err := loadConfig()
	if err != nil {
		return err
	}
	if err := change(cfg, path); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

func setClusterCmd(stdout io.Writer) *cobra.Command {
	var server, ca string
	var embed bool
	cmd := &cobra.Command{
		Use: "set-cluster NAME --server URL [--certificate-authority FILE [--embed-certs]]", Short: "Add or change a cluster",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(cfg *clientcmdapi.Config, _ string) error {
				c := cfg.Clusters[args[0]]
				if c == nil {
					c = clientcmdapi.NewCluster()
					cfg.Clusters[args[0]] = c
				}
				if cmd.Flags().Changed("server") {
					c.Server = server
				}
				if err := setFile(ca, embed, &c.CertificateAuthority, &c.CertificateAuthorityData); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "Cluster %q set.\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "the cluster's jetqueue API URL")
	cmd.Flags().StringVar(&ca, "certificate-authority", "", "CA bundle that verifies the server")
	cmd.Flags().BoolVar(&embed, "embed-certs", false, "copy the files' contents into the config")
	return cmd
}

func setCredentialsCmd(stdout io.Writer) *cobra.Command {
	var token, cert, key string
	var embed bool
	cmd := &cobra.Command{
		Use:   "set-credentials NAME [--token TOKEN | --client-certificate FILE --client-key FILE [--embed-certs]]",
		Short: "Add or change a user's credentials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(cfg *clientcmdapi.Config, _ string) error {
				u := cfg.AuthInfos[args[0]]
				if u == nil {
					u = clientcmdapi.NewAuthInfo()
					cfg.AuthInfos[args[0]] = u
				}
				if cmd.Flags().Changed("token") {
					u.Token = token
				}
				if err := setFile(cert, embed, &u.ClientCertificate, &u.ClientCertificateData); err != nil {
					return err
				}
				if err := setFile(key, embed, &u.ClientKey, &u.ClientKeyData); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "User %q set.\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "bearer token")
	cmd.Flags().StringVar(&cert, "client-certificate", "", "client certificate file")
	cmd.Flags().StringVar(&key, "client-key", "", "client key file")
	cmd.Flags().BoolVar(&embed, "embed-certs", false, "copy the files' contents into the config")
	return cmd
}

func setContextCmd(stdout io.Writer) *cobra.Command {
	var cluster, user string
	cmd := &cobra.Command{
		Use: "set-context NAME --cluster CLUSTER --user USER", Short: "Add or change a context",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(func(cfg *clientcmdapi.Config, _ string) error {
				c := cfg.Contexts[args[0]]
				if c == nil {
					c = clientcmdapi.NewContext()
					cfg.Contexts[args[0]] = c
				}
				if cmd.Flags().Changed("cluster") {
					c.Cluster = cluster
				}
				if cmd.Flags().Changed("user") {
					c.AuthInfo = user
				}
				fmt.Fprintf(stdout, "Context %q set.\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "the context's cluster")
	cmd.Flags().StringVar(&user, "user", "", "the context's user")
	return cmd
}

// setFile records a file path, or with embed its contents.
func setFile(path string, embed bool, file *string, data *[]byte) error {
	if path == "" {
		return nil
	}
	if !embed {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		*file, *data = abs, nil
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	*file, *data = "", b
	return nil
}
