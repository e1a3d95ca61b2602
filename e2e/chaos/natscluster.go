package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// clusterReplicas is the size of the NATS cluster and the replica count
// of every stream and bucket on it.
const clusterReplicas = 3

// shippedAccounts is the accounts file compose and Kubernetes run (the
// nats-cluster overlay includes it beside its cluster block); its
// passwords come from the servers' environment.
const shippedAccounts = "../../deploy/nats/jetqueue.conf"

// natsNode is one server of the cluster, restartable on the same ports
// and store directory.
type natsNode struct {
	*proc
	name        string // server_name, as StreamInfo's Cluster names it
	port, route int
}

func (n *natsNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// natsCluster is three nats-server processes in one JetStream cluster on
// loopback, laid out as deploy/k8s/overlays/nats-cluster lays them out
// (routes to every server, no_advertise, the shipped accounts), with
// fresh passwords for the shipped users.
type natsCluster struct {
	nodes []*natsNode
	// passwords are the shipped users' passwords, by user.
	passwords map[string]string
}

// URLs is every server's client URL, comma-separated, as services take
// them in --nats-url.
func (nc *natsCluster) URLs() string {
	var urls []string
	for _, n := range nc.nodes {
		urls = append(urls, n.URL())
	}
	return strings.Join(urls, ",")
}

// env is the environment a service user connects with: the flags'
// JQ_<FLAG> form, so no password shows in the process list.
func (nc *natsCluster) env(user string) []string {
	return []string{"JQ_NATS_USER=" + user, "JQ_NATS_PASSWORD=" + nc.passwords[user]}
}

// node finds a server by its server_name.
func (nc *natsCluster) node(name string) *natsNode {
	for _, n := range nc.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func startNATSCluster(bin, storeRoot, logDir string) (*natsCluster, error) {
	accounts, err := os.ReadFile(shippedAccounts)
	if err != nil {
		return nil, fmt.Errorf("the shipped accounts: %w", err)
	}
	nc := &natsCluster{passwords: map[string]string{}}
	var serverEnv []string
	users := append(append(append([]string{}, natsconf.Services...), natsconf.NodesUser), natsconf.ShippedNamespaces...)
	for _, u := range users {
		pw := fmt.Sprintf("chaos-%s-%d", u, time.Now().UnixNano())
		nc.passwords[u] = pw
		serverEnv = append(serverEnv, natsconf.PasswordEnv(u)+"="+pw)
	}
	for i := range clusterReplicas {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		route, err := freePort()
		if err != nil {
			return nil, err
		}
		nc.nodes = append(nc.nodes, &natsNode{name: fmt.Sprintf("n%d", i), port: port, route: route})
	}
	var routes []string
	for _, n := range nc.nodes {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.route))
	}
	for _, n := range nc.nodes {
		dir := filepath.Join(storeRoot, n.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// The include is relative to the configuration file, as the
		// overlay's is to its ConfigMap's mount.
		if err := os.WriteFile(filepath.Join(dir, "jetqueue.conf"), accounts, 0o600); err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(conf, []byte(nodeConfig(n, routes, filepath.Join(dir, "js"))), 0o600); err != nil {
			return nil, err
		}
		n.proc = &proc{name: "nats-" + n.name, path: filepath.Join(bin, "nats-server"), logPath: filepath.Join(logDir, "nats-"+n.name+".log"),
			restartOnExit: true, env: serverEnv, args: func(int) []string { return []string{"-c", conf} }}
		if err := n.start(); err != nil {
			return nc, err
		}
	}
	for _, n := range nc.nodes {
		if err := nc.ready(n, time.Minute); err != nil {
			return nc, err
		}
	}
	return nc, nil
}

// nodeConfig is the overlay's nats.conf on loopback: the routes name
// every server (its own route is ignored), JetStream's store is the
// node's own.
func nodeConfig(n *natsNode, routes []string, store string) string {
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
cluster {
  name: jq-chaos
  listen: 127.0.0.1:%d
  no_advertise: true
  routes: [%s]
}
jetstream {
  store_dir: %q
  max_memory_store: 0
}
include jetqueue.conf
`, n.name, n.port, n.route, strings.Join(routes, ", "), store)
}

// restart starts a node again and waits until it takes clients.
func (nc *natsCluster) restart(n *natsNode) error {
	if err := n.start(); err != nil {
		return err
	}
	return nc.ready(n, time.Minute)
}

// ready waits until the node answers an authenticated client. Whether
// JetStream has caught up is what the log tells afterwards.
func (nc *natsCluster) ready(n *natsNode, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := nats.Connect(n.URL(), nats.Timeout(time.Second), nats.UserInfo(suiteUser, nc.passwords[suiteUser]))
		if err == nil {
			_, err = c.RTT()
			c.Close()
		}
		if err == nil {
			return nil
		}
		if alive, _ := n.running(); !alive || time.Now().After(deadline) {
			return fmt.Errorf("%s did not start: %w: %s", n.name, err, n.tail(5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// suiteUser is who the suite connects as: the one service user that may
// read JQ_SUBMIT's info (the others are denied its API), in the JETQUEUE
// account, whose JetStream API tells streams' leaders and takes a
// stepdown.
const suiteUser = "ingest"

// connect is the suite's own connection, as suiteUser,
// to every server, with a short ping interval so that a stopped server
// it is connected to is left within seconds, not the client's default
// four minutes.
func (nc *natsCluster) connect() (*nats.Conn, error) {
	return nats.Connect(nc.URLs(), nats.UserInfo(suiteUser, nc.passwords[suiteUser]),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2), nats.Timeout(2*time.Second))
}

// streamLeader is the server that leads a stream's Raft group now.
func (nc *natsCluster) streamLeader(ctx context.Context, js jetstream.JetStream, stream string) (*natsNode, error) {
	info, err := streamInfo(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return nil, fmt.Errorf("%s has no leader", stream)
	}
	n := nc.node(info.Cluster.Leader)
	if n == nil {
		return nil, fmt.Errorf("%s's leader %q is none of the suite's servers", stream, info.Cluster.Leader)
	}
	return n, nil
}

func streamInfo(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := js.Stream(cctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.Info(cctx)
}

// stepDown asks JQ_EVENTS' leader to hand over (the JetStream API of the
// stream's account) and waits until another server leads it.
func (nc *natsCluster) stepDown(ctx context.Context, conn *nats.Conn, js jetstream.JetStream) (from, to string, err error) {
	old, err := nc.streamLeader(ctx, js, events.Stream)
	if err != nil {
		return "", "", err
	}
	msg, err := conn.Request("$JS.API.STREAM.LEADER.STEPDOWN."+events.Stream, nil, 5*time.Second)
	if err != nil {
		return old.name, "", fmt.Errorf("stepdown request: %w", err)
	}
	if strings.Contains(string(msg.Data), `"error"`) {
		return old.name, "", fmt.Errorf("stepdown refused: %s", msg.Data)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := nc.streamLeader(ctx, js, events.Stream); err == nil && n != old {
			return old.name, n.name, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return old.name, "", fmt.Errorf("no other server led %s within 30s of the stepdown", events.Stream)
}

// errReplicas marks a stream or bucket that is not replicated as asked.
var errReplicas = errors.New("not replicated on every server")

// checkReplicas asserts that JQ_EVENTS, JQ_SUBMIT and every other
// stream of the account (the KV buckets' KV_*, the snapshots' OBJ_*) are
// configured with want replicas and that the cluster reports a leader and
// want-1 followers for each. It returns each stream's name and leader.
func checkReplicas(ctx context.Context, js jetstream.JetStream, want int) ([]string, error) {
	names := []string{events.Stream, "JQ_SUBMIT"}
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	var out []string
	var errs []error
	for _, name := range names {
		info, err := streamInfo(ctx, js, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		followers := 0
		leader := ""
		if info.Cluster != nil {
			followers, leader = len(info.Cluster.Replicas), info.Cluster.Leader
		}
		if info.Config.Replicas != want || followers != want-1 || leader == "" {
			errs = append(errs, fmt.Errorf("%s: %w: configured R%d, leader %q and %d followers", name, errReplicas, info.Config.Replicas, leader, followers))
			continue
		}
		out = append(out, fmt.Sprintf("%s(R%d, leader %s)", name, info.Config.Replicas, leader))
	}
	return out, errors.Join(errs...)
}

// freeze pauses a node with SIGSTOP: it holds its sockets open and
// answers nothing, as a server stuck in a long pause does; thaw resumes
// it. (proc.signal waits for an exit, which a stop never brings.)
func (n *natsNode) freeze() error { return n.signalNoWait(syscall.SIGSTOP) }
func (n *natsNode) thaw() error   { return n.signalNoWait(syscall.SIGCONT) }

// nodeNames names nodes in a fault line.
func nodeNames(ns []*natsNode) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.name)
	}
	return strings.Join(out, "+")
}

// readReplicatedLog reads the whole of JQ_EVENTS as ReadLog does, with
// the same refusals (a gap, a deleted message, an event that does not
// decode), through a consumer that it makes again from the next sequence
// after a failed fetch. On a cluster just through its faults, an
// ephemeral consumer's first pull can find no responder while its leader
// is still being placed; ReadLog's ordered consumer gives up on that.
func readReplicatedLog(ctx context.Context, js jetstream.JetStream) ([]Record, error) {
	info, err := streamInfo(ctx, js, events.Stream)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	if last > 0 && (info.State.FirstSeq != 1 || info.State.Msgs != last) {
		return nil, fmt.Errorf("stream %s holds %d messages from seq %d to %d: some were deleted",
			events.Stream, info.State.Msgs, info.State.FirstSeq, last)
	}
	log := make([]Record, 0, last)
	failures := 0
	for uint64(len(log)) < last {
		n, err := readFrom(ctx, js, &log, last)
		if err == nil {
			continue
		}
		if n > 0 {
			failures = 0
		}
		if failures++; failures == 20 || ctx.Err() != nil {
			return nil, fmt.Errorf("read %s after seq %d: %w", events.Stream, len(log), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return log, nil
}

// readFrom reads on from the log's end through a new consumer until the
// stream's last sequence or an error; it returns how many it read.
func readFrom(ctx context.Context, js jetstream.JetStream, log *[]Record, last uint64) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := js.Stream(cctx, events.Stream)
	if err != nil {
		return 0, err
	}
	cons, err := stream.CreateConsumer(cctx, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: uint64(len(*log)) + 1,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1,
	})
	if err != nil {
		return 0, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	start := len(*log)
	for uint64(len(*log)) < last {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return len(*log) - start, err
		}
		n := len(*log)
		for msg := range batch.Messages() {
			if *log, err = appendRecord(*log, msg); err != nil {
				// A gap here may be a pull that failed midway: the
				// next consumer starts after the last one read.
				return len(*log) - start, err
			}
		}
		if err := batch.Error(); err != nil {
			return len(*log) - start, err
		}
		if len(*log) == n {
			return 0, fmt.Errorf("nothing after seq %d of %d", n, last)
		}
	}
	*log = (*log)[:last]
	return len(*log) - start, nil
}
