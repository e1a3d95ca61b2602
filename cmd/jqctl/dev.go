package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/embedded"
	"github.com/jetqueue/jetqueue/libs/natsconf"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
	"github.com/jetqueue/jetqueue/services/podsready/podsready"
	"github.com/jetqueue/jetqueue/services/preemptor/preemptor"
	"github.com/jetqueue/jetqueue/services/scorer/scorer"
)

// devOptions are `jqctl dev`'s flags.
type devOptions struct {
	dataDir     string
	httpAddr    string
	manualClock bool
	demo        bool
	examples    string
	// tokenAuthFile and policyFile are a team's own users and RBAC
	// policy, passed to ingest beside the admin that dev makes.
	tokenAuthFile string
	policyFile    string
}

func newDev(stdout, stderr io.Writer) *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run jetqueue on this machine: embedded NATS, PostgreSQL, and the services in one process",
		Long: `dev runs all five services (ingest, admission, preemptor, podsready, scorer) in one process,
each through its real entry point, with an embedded JetStream server whose
data lives under --data-dir, and PostgreSQL from DATABASE_URL or, when unset,
a private cluster made with the local PostgreSQL binaries under --data-dir.
A restart keeps everything. Ctrl-C stops it cleanly.

Authentication is on: dev makes an admin (a bearer token in system:masters,
kept under --data-dir/auth), writes the context jetqueue-dev with it into
jqctl's config ($JQCTL_CONFIG, else $XDG_CONFIG_HOME/jqctl/config, else
~/.config/jqctl/config) as the current context, and runs NATS with accounts and a user per service.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, o, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", ".jetqueue", "where NATS (and the private PostgreSQL) keep their data")
	cmd.Flags().StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP API")
	cmd.Flags().BoolVar(&o.manualClock, "manual-clock", false, "start the shared manual clock at 2026-01-01 and enable POST /v1/debug/clock/advance")
	cmd.Flags().BoolVar(&o.demo, "demo", false, "load the demo setup (examples/demo.yaml, the nodes of examples/demo-nodes.yaml, the jobs of examples/demo-workloads.yaml)")
	cmd.Flags().StringVar(&o.examples, "examples", "examples", "directory of the demo files")
	cmd.Flags().StringVar(&o.tokenAuthFile, "token-auth-file", "", "users to add to dev's admin: kube-apiserver's static token CSV, as ingest's --token-auth-file")
	cmd.Flags().StringVar(&o.policyFile, "authorization-policy-file", "", "RBAC Roles, ClusterRoles and bindings for ingest (its --authorization-policy-file); dev's admin is in system:masters")
	return cmd
}

func runDev(ctx context.Context, o devOptions, stdout, stderr io.Writer) error {
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tokens, adminToken, err := devTokens(dir, o.tokenAuthFile)
	if err != nil {
		return err
	}
	policy, err := devPolicy(dir, o.policyFile)
	if err != nil {
		return err
	}
	srv, ids, authDir, err := devNATS(dir)
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	defer srv.Shutdown()
	dbURL, stopDB, err := devDatabase(ctx, dir)
	if err != nil {
		return err
	}
	defer stopDB()

	log, err := zap.NewDevelopment(zap.IncreaseLevel(zap.WarnLevel))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 3)
	// admins receives each service's admin address (its /metrics) once.
	admins := make(chan [2]string, len(devServices))
	run := func(name string, main service.Main) {
		var once sync.Once
		go func() {
			errc <- service.RunContext(sctx, name, service.Options{AdminAddr: "127.0.0.1:0", StopTimeout: 10 * time.Second}, log,
				func(ctx context.Context, rt *service.Runtime) error {
					once.Do(func() { admins <- [2]string{name, rt.AdminAddr} })
					return main(ctx, rt)
				})
		}()
	}
	nats := srv.ClientURL()
	run("admission", func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, admission.Config{Member: devMember(nats, ids, "admission"), ManualClock: o.manualClock, Snapshot: snapshot.DefaultPolicy})
	})
	run("preemptor", func(ctx context.Context, rt *service.Runtime) error {
		return preemptor.Run(ctx, rt, preemptor.Config{Member: devMember(nats, ids, "preemptor")})
	})
	run("podsready", func(ctx context.Context, rt *service.Runtime) error {
		return podsready.Run(ctx, rt, podsready.Config{Member: devMember(nats, ids, "podsready"), ManualClock: o.manualClock, Snapshot: snapshot.DefaultPolicy})
	})
	run("scorer", func(ctx context.Context, rt *service.Runtime) error {
		return scorer.Run(ctx, rt, scorer.Config{NATSURL: nats, NATS: ids["scorer"], Instance: "dev", Inventory: scorer.InventoryKV, Snapshot: snapshot.DefaultPolicy})
	})
	listening := make(chan string, 1)
	run("ingest", func(ctx context.Context, rt *service.Runtime) error {
		return ingest.Run(ctx, rt, ingest.Config{NATSURL: nats, NATS: ids["ingest"], DatabaseURL: dbURL, HTTPAddr: o.httpAddr, ManualClock: o.manualClock,
			Auth:   auth.Options{TokenAuthFile: tokens, AuthorizationPolicyFile: policy},
			MaxLag: 50_000, Listening: func(a string) { listening <- a }})
	})
	var addr string
	select {
	case addr = <-listening:
	case err := <-errc:
		cancel()
		return fmt.Errorf("a service did not start: %w", err)
	case <-ctx.Done():
		return nil
	}
	metricsAt := map[string]string{}
	for len(metricsAt) < len(devServices) {
		select {
		case a := <-admins:
			metricsAt[a[0]] = a[1]
		case err := <-errc:
			cancel()
			return fmt.Errorf("a service did not start: %w", err)
		case <-ctx.Done():
			return nil
		}
	}
	base := "http://" + addr
	configPath, err := writeDevContext(base, adminToken)
	if err != nil {
		cancel()
		return fmt.Errorf("jqctl config: %w", err)
	}
	if o.demo {
		if err := loadDemo(ctx, base, adminToken, nats, ids[natsconf.NodesUser], o.examples, stdout); err != nil {
			cancel()
			return err
		}
	}
	fmt.Fprintf(stdout, `jetqueue is running.
  HTTP API:  %s (admin token: %s; tokens ingest accepts: %s)
  jqctl:     context %s, now current, in %s
  NATS:      %s (users and passwords: %s, one <user>.password each)
  data:      %s
  metrics:
%sTry:
%sCtrl-C stops it.
`, base, filepath.Join(dir, "auth", "admin.token"), tokens, devContext, configPath, nats, authDir, dir, metricsLines(metricsAt), tryCommands(o.demo))
	select {
	case <-ctx.Done():
	case err = <-errc:
		fmt.Fprintln(stderr, "jqctl dev: a service stopped:", err)
	}
	cancel()
	for range 3 {
		select {
		case e := <-errc:
			if e != nil && err == nil {
				err = e
			}
		case <-time.After(15 * time.Second):
		}
		if err != nil {
			break
		}
	}
	return err
}

// devMember is a lease-holding service's place on the dev bus, as its
// own NATS user.
func devMember(nats string, ids map[string]bus.Identity, service string) bus.Member {
	return bus.Member{NATSURL: nats, Identity: ids[service], Shard: service + "-0", Instance: "dev"}
}

// tryCommands are three first steps: the README's tour on the demo,
// otherwise the quickstart. The current context reaches dev's server.
func tryCommands(demo bool) string {
	steps := []string{"apply -f examples/quickstart.yaml", "submit -f examples/job.yaml", "get workloads -o wide"}
	if demo {
		steps = []string{"submit -f examples/sweep-job.yaml", "submit -f examples/gpu-job.yaml", "get workloads -o wide"}
	}
	var b strings.Builder
	for _, st := range steps {
		fmt.Fprintf(&b, "  jqctl %s\n", st)
	}
	return b.String()
}

// devDatabase returns the projection's database: DATABASE_URL's, or a
// private cluster under the data directory, created on first use.
func devDatabase(ctx context.Context, dir string) (string, func(), error) {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		return url, func() {}, nil
	}
	admin, stop, err := embedded.StartPostgres(ctx, filepath.Join(dir, "postgres"))
	if errors.Is(err, embedded.ErrNoPostgres) {
		return "", nil, fmt.Errorf("no DATABASE_URL, and a private PostgreSQL could not start (%v): "+
			"install the PostgreSQL server (Debian: apt install postgresql) or set DATABASE_URL", err)
	}
	if err != nil {
		// Installed but failed: its log says why, not a missing package.
		return "", nil, fmt.Errorf("the private PostgreSQL under %s could not start (its log: %s): %w",
			filepath.Join(dir, "postgres"), filepath.Join(dir, "postgres", "postgres.log"), err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		stop()
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE jetqueue"); err != nil && !strings.Contains(err.Error(), "already exists") {
		stop()
		return "", nil, err
	}
	return strings.Replace(admin, "/postgres?", "/jetqueue?", 1), stop, nil
}

// loadDemo applies the demo configuration and puts its nodes.
func loadDemo(ctx context.Context, base, token, natsURL string, nodesUser bus.Identity, dir string, stdout io.Writer) error {
	post := func(path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/yaml")
		req.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(req)
	}
	data, err := os.ReadFile(filepath.Join(dir, "demo.yaml"))
	if err != nil {
		return fmt.Errorf("--demo: %w (run from the repository root or pass --examples)", err)
	}
	resp, err := post("/v1/apply", string(data))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("--demo: apply answered %d: %s", resp.StatusCode, body)
	}
	nodes, err := os.ReadFile(filepath.Join(dir, "demo-nodes.yaml"))
	if err != nil {
		return fmt.Errorf("--demo: %w", err)
	}
	states, err := parseNodeStates(nodes)
	if err != nil {
		return fmt.Errorf("--demo: %s: %w", filepath.Join(dir, "demo-nodes.yaml"), err)
	}
	if err := putNodes(ctx, natsURL, nodesUser, states, io.Discard); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	workloads, err := os.ReadFile(filepath.Join(dir, "demo-workloads.yaml"))
	if err != nil {
		return fmt.Errorf("--demo: %w", err)
	}
	// Submitting the same workloads again (a restart) changes nothing.
	resp, err = post("/v1/workloads", string(workloads))
	if err != nil {
		return err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("--demo: submitting %s answered %d: %s", filepath.Join(dir, "demo-workloads.yaml"), resp.StatusCode, body)
	}
	fmt.Fprintln(stdout, "demo setup loaded: flavors gpu-a100 and cpu-standard, cohorts research and batch, 4 nodes, 2 jobs")
	return nil
}

// devServices are the services dev runs, in the order it lists them.
var devServices = []string{"ingest", "admission", "preemptor", "podsready", "scorer"}

// metricsLines lists each service's metrics address (docs/metrics.md says
// which metrics each serves).
func metricsLines(at map[string]string) string {
	var b strings.Builder
	for _, name := range devServices {
		fmt.Fprintf(&b, "    %-10s http://%s/metrics\n", name+":", at[name])
	}
	return b.String()
}
