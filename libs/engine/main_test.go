package engine

import (
	"flag"
	"os"
	"testing"
)

// TestMain has every run of the package's tests check the fingerprint it
// keeps from run to run against a full one (see startFingerprint), except
// when benchmarking, which measures the engine as services run it.
func TestMain(m *testing.M) {
	flag.Parse()
	checkFingerprint = flag.Lookup("test.bench").Value.String() == ""
	if checkFingerprint {
		checkStats = statsAgreeWithAWalk
	}
	os.Exit(m.Run())
}
