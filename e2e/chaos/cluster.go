package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
)

// Services are the five binaries, in the order the summary names them.
var Services = []string{"ingest", "admission", "preemptor", "podsready", "scorer"}

// leaseTTL is every decider's --lease-ttl: short, so that a killed
// leader's standby takes over within seconds.
const leaseTTL = 2 * time.Second

// admissionShard is admission's lease key in JQ_LEASES (its --shard).
const admissionShard = "admission-0"

// Build compiles the five services and nats-server into dir. It runs in
// the e2e module, so nats-server is the version its go.mod requires.
func Build(ctx context.Context, e2eDir, dir string) error {
	pkgs := []string{}
	for _, s := range Services {
		pkgs = append(pkgs, "../services/"+s)
	}
	for _, args := range [][]string{
		append([]string{"build", "-o", dir + "/"}, pkgs...),
		{"build", "-o", filepath.Join(dir, "nats-server"), "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = e2eDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// cluster is every process of one run.
type cluster struct {
	bin, logDir string
	nats        *natsServer
	pg          *postgres
	// services holds each service's instances: two ingest and two
	// admission instances, one of every other service.
	services map[string][]*proc
	// ingestURLs are the ingest instances' HTTP APIs.
	ingestURLs []string
	// profilers are the services' profiler addresses, by process name,
	// when startClusterOf was asked for them.
	profilers map[string]string
	// natsURLs, when set, is how services reach a NATS cluster instead of
	// nats (comma-separated URLs), natsEnv their credentials, and
	// replicas their --stream-replicas.
	natsURLs string
	natsEnv  func(svc string) []string
	replicas int
}

func startCluster(bin, logDir, natsStore string) (*cluster, error) {
	return startClusterOf(bin, logDir, natsStore, map[string]int{"ingest": 2, "admission": 2, "preemptor": 1, "podsready": 1, "scorer": 1}, false)
}

// startClusterOf starts nats-server, PostgreSQL and instances[svc]
// instances of each service, each with a profiler (--pprof-addr) if
// profilers is set.
func startClusterOf(bin, logDir, natsStore string, instances map[string]int, profilers bool) (*cluster, error) {
	c := &cluster{bin: bin, logDir: logDir, services: map[string][]*proc{}}
	if profilers {
		c.profilers = map[string]string{}
	}
	var err error
	if c.nats, err = startNATS(filepath.Join(bin, "nats-server"), natsStore, logDir); err != nil {
		return c, err
	}
	if c.pg, err = startPostgres(logDir); err != nil {
		return c, err
	}
	return c, c.startServices(instances)
}

// startServices starts instances[svc] instances of each service.
func (c *cluster) startServices(instances map[string]int) error {
	for _, svc := range Services {
		for i := range instances[svc] {
			p, err := c.service(svc, string(rune('a'+i)))
			if err != nil {
				return err
			}
			c.services[svc] = append(c.services[svc], p)
		}
	}
	for _, ps := range c.services {
		for _, p := range ps {
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	return nil
}

// service prepares one instance of a service; instance names change with
// every incarnation ("admission-a.3"), so the lease tells which
// incarnation holds it.
func (c *cluster) service(svc, instance string) (*proc, error) {
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	name := svc + "-" + instance
	natsURL := c.natsURLs
	if natsURL == "" {
		natsURL = c.nats.URL()
	}
	common := []string{"--nats-url", natsURL, "--admin-addr", "127.0.0.1:" + strconv.Itoa(admin), "--log-json=false"}
	if c.replicas > 1 {
		common = append(common, "--stream-replicas", strconv.Itoa(c.replicas))
	}
	var env []string
	if c.natsEnv != nil {
		env = c.natsEnv(svc)
	}
	if c.profilers != nil {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c.profilers[name] = "127.0.0.1:" + strconv.Itoa(port)
		common = append(common, "--pprof-addr", c.profilers[name])
	}
	var extra []string
	switch svc {
	case "ingest":
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c.ingestURLs = append(c.ingestURLs, "http://"+addr)
		// The load is a trusted client: authentication is not under test.
		extra = []string{"--http-addr", addr, "--database-url", c.pg.URL(), "--anonymous"}
	case "admission", "preemptor", "podsready":
		extra = []string{"--lease-ttl", leaseTTL.String()}
	}
	return &proc{name: name, path: filepath.Join(c.bin, svc), logPath: filepath.Join(c.logDir, name+".log"), restartOnExit: true, env: env,
		args: func(inc int) []string {
			args := append(slices.Clone(common), extra...)
			if svc != "ingest" {
				args = append(args, "--instance", instanceName(name, inc))
			}
			return args
		}}, nil
}

func instanceName(proc string, incarnation int) string {
	return fmt.Sprintf("%s.%d", proc, incarnation)
}

// all lists every process, servers last.
func (c *cluster) all() []*proc {
	var out []*proc
	for _, svc := range Services {
		out = append(out, c.services[svc]...)
	}
	if c.nats != nil {
		out = append(out, c.nats.proc)
	}
	if c.pg != nil {
		out = append(out, c.pg.proc)
	}
	return out
}

// close kills every process the suite started, services first.
func (c *cluster) close() {
	for _, p := range c.all() {
		if c.pg != nil && p == c.pg.proc {
			c.pg.close()
			continue
		}
		p.stop(syscall.SIGKILL)
	}
}

// admissionLeader finds the admission instance whose current
// incarnation holds the lease.
func (c *cluster) admissionLeader(ctx context.Context, js jetstream.JetStream) (*proc, string, error) {
	kv, err := js.KeyValue(ctx, bus.LeaseBucket)
	if err != nil {
		return nil, "", fmt.Errorf("lease bucket: %w", err)
	}
	entry, err := kv.Get(ctx, admissionShard)
	if err != nil {
		return nil, "", fmt.Errorf("lease %s: %w", admissionShard, err)
	}
	holder := string(entry.Value())
	for _, p := range c.services["admission"] {
		if alive, inc := p.running(); alive && instanceName(p.name, inc) == holder {
			return p, holder, nil
		}
	}
	return nil, holder, errNoLeader
}

var errNoLeader = errors.New("the lease holder is no running admission incarnation")

// positions says how far each reader of the log has come: the stream's
// last sequence, every progress mark, the projection's stored sequence
// and the scorer's consumer. It is what a run that did not settle
// reports, read straight from NATS and PostgreSQL.
func (c *cluster) positions(ctx context.Context, js jetstream.JetStream) string {
	var parts []string
	if info, err := js.Stream(ctx, events.Stream); err != nil {
		parts = append(parts, fmt.Sprintf("stream: %v", err))
	} else if si, err := info.Info(ctx); err != nil {
		parts = append(parts, fmt.Sprintf("stream: %v", err))
	} else {
		parts = append(parts, fmt.Sprintf("stream last seq %d", si.State.LastSeq))
		if ci, err := info.Consumer(ctx, events.ScorerDurable); err == nil {
			if cinfo, err := ci.Info(ctx); err == nil {
				parts = append(parts, fmt.Sprintf("scorer consumer %d to deliver, %d unacknowledged", cinfo.NumPending, cinfo.NumAckPending))
			}
		}
	}
	if marks, err := bus.ReadMarks(ctx, js); err != nil {
		parts = append(parts, fmt.Sprintf("progress marks: %v", err))
	} else {
		for _, k := range slices.Sorted(maps.Keys(marks)) {
			parts = append(parts, fmt.Sprintf("%s at %d", k, marks[k].Seq))
		}
	}
	var seq int64
	if conn, err := pgx.Connect(ctx, c.pg.URL()); err != nil {
		parts = append(parts, fmt.Sprintf("projection: %v", err))
	} else {
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `SELECT last_seq FROM projection_state`).Scan(&seq); err != nil {
			parts = append(parts, fmt.Sprintf("projection: %v", err))
		} else {
			parts = append(parts, fmt.Sprintf("projection at %d", seq))
		}
	}
	return strings.Join(parts, ", ")
}
