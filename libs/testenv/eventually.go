package testenv

import (
	"testing"
	"time"
)

// Eventually calls check until it returns nil, failing the test with its
// last error once within has passed: services, informers and followers
// converge asynchronously, and a test can only wait for them.
func Eventually(tb testing.TB, what string, within time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
