package ingest

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestMeasureConsoleStreams reports what idle console streams cost
// everyone's submissions: the process's CPU (ingest and the embedded
// NATS server) for JQ_MEASURE_SUBMITS submissions (400) with no stream
// open and with JQ_MEASURE_STREAMS (100) idle ones, watching a
// namespace nothing happens in. A measurement, not a check: it runs
// only with JQ_MEASURE=1 and fails on no figure.
//
//	JQ_MEASURE=1 go test -count=1 -run TestMeasureConsoleStreams -v ./ingest
func TestMeasureConsoleStreams(t *testing.T) {
	if os.Getenv("JQ_MEASURE") == "" {
		t.Skip("a measurement: set JQ_MEASURE=1")
	}
	submits, streams := envInt("JQ_MEASURE_SUBMITS", 400), envInt("JQ_MEASURE_STREAMS", 100)
	oldMax := maxWatchers
	maxWatchers = streams + 1
	t.Cleanup(func() { maxWatchers = oldMax })
	for _, open := range []int{0, streams} {
		f := newFrontDoor(t)
		f.cfg.HTTP.MaxWatchesPerCaller = streams + 1
		srv := httptest.NewServer(f.h)
		for i := range open {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/watch/workloads?namespace=idle", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %d: %v %v", i, err, resp)
			}
			// Read up to ": watching": the stream's reader is in place.
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
		}
		before := cpu()
		for i := range submits {
			if code, _, body := f.do(t, "POST", "/v1/workloads", nil, workload(fmt.Sprintf("w%d", i), "1")); code != http.StatusAccepted {
				t.Fatalf("submit: %d %s", code, body)
			}
		}
		// The streams read what was published after the last answer;
		// this settle is part of the figure, not of any check.
		time.Sleep(2 * time.Second)
		t.Logf("%d submissions with %d idle console streams: %.2f CPU-s (process: ingest + embedded NATS)", submits, open, (cpu() - before).Seconds())
		srv.CloseClientConnections()
		srv.Close()
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
