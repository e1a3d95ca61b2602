package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// cpuUse is CPU time spent so far by this test process (every in-process
// service, the embedded NATS server and the bench's own clients) and by
// the machine's PostgreSQL processes.
type cpuUse struct {
	self, postgres time.Duration
}

// readCPU reads both. PostgreSQL's share is the sum over every live
// process named postgres (its backends and helpers); on a machine without
// /proc it stays zero.
func readCPU() cpuUse {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpuUse{self: self, postgres: postgresCPU()}
}

func (c cpuUse) sub(before cpuUse) cpuUse {
	return cpuUse{self: c.self - before.self, postgres: c.postgres - before.postgres}
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

func postgresCPU() time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // gone since the glob
		}
		// pid (comm) state ppid … utime(14) stime(15): comm may hold
		// spaces, so the fields start after its closing parenthesis.
		open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || end < open || string(raw[open+1:end]) != "postgres" {
			continue
		}
		f := bytes.Fields(raw[end+1:])
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
		stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
		total += time.Duration(utime+stime) * clockTick
	}
	return total
}
