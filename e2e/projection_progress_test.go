package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProjectionRebuildShowsProgress runs `jqctl projection rebuild`
// against a running system: while the projector replays the stream,
// jqctl prints how far it is on stderr, ending at every event of the
// stream as it was when the rebuild began, then says where it stopped.
func TestProjectionRebuildShowsProgress(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	for i := range 30 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	last := s.streamState().LastSeq
	bin := filepath.Join(t.TempDir(), "jqctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/jetqueue/jetqueue/cmd/jqctl")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "--server", s.base, "projection", "rebuild", "--progress", "10ms")
	cmd.Env = append(os.Environ(), "JQCTL_CONFIG="+filepath.Join(t.TempDir(), "none"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("jqctl: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	re := regexp.MustCompile(`^rebuilding the projection: (\d+) of (\d+) events \((\d+)%\), \S+$`)
	var prev uint64
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("stderr line %d %q is not progress:\n%s", i, l, stderr.String())
		}
		done, _ := strconv.ParseUint(m[1], 10, 64)
		of, _ := strconv.ParseUint(m[2], 10, 64)
		if of != last || done < prev {
			t.Fatalf("line %q: want progress of the stream's %d events, never going back (after %d)", l, last, prev)
		}
		prev = done
	}
	if want := fmt.Sprintf("rebuilding the projection: %d of %d events (100%%)", last, last); !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Fatalf("last progress line %q, want %q", lines[len(lines)-1], want)
	}
	if want := fmt.Sprintf("projection rebuilt up to event %d\n", last); stdout.String() != want {
		t.Fatalf("stdout %q, want %q", stdout.String(), want)
	}
}
