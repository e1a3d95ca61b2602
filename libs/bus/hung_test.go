package bus

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestConnectNoticesAHungServerFast: a server that stops answering (here
// frozen with SIGSTOP: its socket stays open, so no reset tells the
// client) is noticed by Connect's pings within seconds, not nats.go's
// default of minutes. The server runs in a child process (this test
// binary again, as TestHelperNATSServer), since freezing an embedded
// server would freeze the test.
func TestConnectNoticesAHungServerFast(t *testing.T) {
	if testing.Short() {
		t.Skip("waits up to 10s for a frozen server to be noticed")
	}
	url, child := childServer(t, false)

	disconnected := make(chan time.Time, 1)
	nc, err := Connect(url, t.Name(), nats.DisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case disconnected <- time.Now():
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := child.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	select {
	case at := <-disconnected:
		t.Logf("a frozen server was noticed after %s", at.Sub(frozen).Round(10*time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("a frozen server went unnoticed for 10s")
	}
}

// childServer starts TestHelperNATSServer in a child process (with
// JetStream when jetStream is set) and returns its URL and process, to
// freeze with SIGSTOP; it is thawed and killed when the test ends.
func childServer(t *testing.T, jetStream bool) (string, *os.Process) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperNATSServer$")
	child.Env = append(os.Environ(), "JQ_TEST_NATS_CHILD=1")
	if jetStream {
		child.Env = append(child.Env, "JQ_TEST_NATS_STORE="+t.TempDir())
	}
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child server printed no address: %v", err)
	}
	return url[:len(url)-1], child.Process
}

// TestHelperNATSServer is childServer's child: a plain nats-server (with
// JetStream in JQ_TEST_NATS_STORE, when set) that prints its address and
// serves until killed.
func TestHelperNATSServer(t *testing.T) {
	if os.Getenv("JQ_TEST_NATS_CHILD") != "1" {
		t.Skip("runs only as childServer's child")
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true}
	if dir := os.Getenv("JQ_TEST_NATS_STORE"); dir != "" {
		opts.JetStream, opts.StoreDir = true, dir
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	os.Stdout.WriteString(srv.ClientURL() + "\n")
	select {}
}

// TestConnectOptions pins what Connect sets, for the options a test
// cannot cheaply watch work.
func TestConnectOptions(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := Connect(srv.ClientURL(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	o := nc.Opts
	if o.PingInterval != 2*time.Second || o.MaxPingsOut != 3 || o.Timeout != 2*time.Second || o.MaxReconnect != -1 {
		t.Errorf("ping every %s, %d outstanding, dial timeout %s, max reconnects %d; want 2s, 3, 2s, -1",
			o.PingInterval, o.MaxPingsOut, o.Timeout, o.MaxReconnect)
	}
}
