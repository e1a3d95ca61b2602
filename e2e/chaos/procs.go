package chaos

import (
	"bytes"

	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one OS process the suite started and may kill: a service,
// nats-server or PostgreSQL's postmaster. It keeps its output in one log
// file across incarnations. When it exits on its own (a crash, not our
// kill), it is started again after a pause, as a process supervisor
// would; such exits are counted.
type proc struct {
	name string
	path string
	// args gives the arguments of an incarnation (an instance name may
	// change with it).
	args    func(incarnation int) []string
	logPath string
	// cred, when set, runs the process as another user (PostgreSQL
	// refuses to run as root).
	cred *syscall.Credential
	// restartOnExit restarts a process that exited by itself.
	restartOnExit bool
	// env, when set, is added to the suite's environment (credentials,
	// kept off the process list).
	env []string

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
	incarnation int
	killing     bool
	stopped     bool // no more restarts: the suite is over
	exits       int  // exits we did not cause
}

// pid is the running incarnation's process id (0 when none started).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// start runs a new incarnation.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *proc) startLocked() error {
	if p.stopped {
		return fmt.Errorf("%s: the suite is over", p.name)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", p.name, err)
	}
	p.incarnation++
	cmd := exec.Command(p.path, p.args(p.incarnation)...)
	cmd.Stdout, cmd.Stderr = f, f
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	// Its own process group, so that a terminal's ^C reaches the test
	// alone and the test decides what dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	fmt.Fprintf(f, "=== chaos: %s incarnation %d started, pid %d, at %s\n", p.name, p.incarnation, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
	done := make(chan struct{})
	p.cmd, p.done, p.killing = cmd, done, false
	go p.wait(cmd, f, done)
	return nil
}

// wait reaps an incarnation and restarts it when it exited by itself.
func (p *proc) wait(cmd *exec.Cmd, f *os.File, done chan struct{}) {
	err := cmd.Wait()
	fmt.Fprintf(f, "=== chaos: %s pid %d exited at %s: %v\n", p.name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
	f.Close()
	p.mu.Lock()
	ours := p.killing || p.stopped
	if !ours {
		p.exits++
	}
	p.mu.Unlock()
	close(done)
	if ours || !p.restartOnExit {
		return
	}
	time.Sleep(500 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == cmd && !p.stopped {
		_ = p.startLocked()
	}
}

// kill sends SIGKILL to the running incarnation and waits until it is
// reaped. It returns false when nothing was running.
func (p *proc) kill() bool {
	return p.signal(syscall.SIGKILL, false)
}

// stop ends the process for good at the end of the suite.
func (p *proc) stop(sig syscall.Signal) {
	p.signal(sig, true)
}

func (p *proc) signal(sig syscall.Signal, final bool) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if final {
		p.stopped = true
	}
	running := cmd != nil && !isClosed(done)
	if running {
		p.killing = true
		// Only the pid of a process we started and have not reaped: it
		// cannot have been reused.
		_ = syscall.Kill(cmd.Process.Pid, sig)
	}
	p.mu.Unlock()
	if !running {
		return false
	}
	<-done
	return true
}

// running reports whether an incarnation is alive, and its number.
func (p *proc) running() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done), p.incarnation
}

func (p *proc) selfExits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// grep returns the log lines that contain any of words, at most n.
func (p *proc) grep(n int, words ...string) []string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
		if len(out) == n {
			break
		}
	}
	return out
}

// freePort finds a free loopback port. Another program could take it
// before we bind it; the suite's ports are all taken at the start.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP waits until something accepts connections on addr.
func waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections within %s: %w", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
