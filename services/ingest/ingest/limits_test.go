package ingest

import (
	"strings"
	"testing"
)

// TestSubmitLimitsRefuseNonPositive: JQ_SUBMIT's bounds must be positive
// (0 would mean unlimited to JetStream); the error names the flag.
func TestSubmitLimitsRefuseNonPositive(t *testing.T) {
	if err := DefaultSubmitLimits.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for flag, l := range map[string]SubmitLimits{
		"--submit-max-msgs":  {MaxMsgs: 0, MaxBytes: 1},
		"--submit-max-bytes": {MaxMsgs: 1, MaxBytes: -1},
	} {
		err := l.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), flag+" ") {
			t.Errorf("%+v: error %v, want one naming %s", l, err, flag)
		}
	}
}
