package chaos

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profile starts a CPU profile of every service process for d, written
// to dir/<process>.pprof, and returns a wait for them all. With no dir,
// or a cluster started without profilers, it does nothing.
func (c *cluster) profile(dir string, d time.Duration) func() error {
	if dir == "" || c.profilers == nil {
		return func() error { return nil }
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() error { return err }
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(c.profilers))
	var mu sync.Mutex
	for name, addr := range c.profilers {
		wg.Go(func() {
			if err := saveProfile(addr, filepath.Join(dir, name+".pprof"), d); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

func saveProfile(addr, path string, d time.Duration) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(int(d.Seconds()), 1))
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
