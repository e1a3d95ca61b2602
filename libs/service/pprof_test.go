package service

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestPprofRefusesNonLoopback: the profiler has no authentication, so an
// address anyone else could reach stops the service before it starts,
// with an error naming the flag; its main never runs.
func TestPprofRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.1.2.3:6060", "localhost:6060", "example.com:6060", "127.0.0.1"} {
		ran := false
		err := RunContext(context.Background(), "test", Options{AdminAddr: "127.0.0.1:0", PprofAddr: addr}, zap.NewNop(),
			func(context.Context, *Runtime) error { ran = true; return nil })
		if err == nil || !strings.Contains(err.Error(), "--pprof-addr") {
			t.Errorf("%q: got %v, want an error naming --pprof-addr", addr, err)
		}
		if ran {
			t.Errorf("%q: the service ran", addr)
		}
	}
}

// TestPprofServesOnLoopback: on a loopback address the profiler answers;
// without the flag nothing listens for it, and the admin port does not
// serve it either.
func TestPprofServesOnLoopback(t *testing.T) {
	for _, want := range []bool{true, false} {
		o := Options{AdminAddr: "127.0.0.1:0", StopTimeout: 5 * time.Second}
		if want {
			o.PprofAddr = "127.0.0.1:0"
		}
		rt, stop := runService(t, o)
		if (rt.PprofAddr != "") != want {
			t.Errorf("profiler wanted %v: PprofAddr %q", want, rt.PprofAddr)
		}
		if want {
			if code, body := fetch(t, "http://"+rt.PprofAddr+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
				t.Errorf("profiler: %d %.80q", code, body)
			}
		}
		if code, _ := fetch(t, "http://"+rt.AdminAddr+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("admin port serves the profiler: %d", code)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
