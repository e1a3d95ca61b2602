package retention

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsRefuseWhatCouldLoseState: every duration must be positive
// and the snapshots named; the error names the flag at fault.
func TestOptionsRefuseWhatCouldLoseState(t *testing.T) {
	good := Options{Retention: time.Hour, HistoryRetention: time.Hour, Interval: time.Second, Snapshots: []string{"admission-0"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range []struct {
		flag string
		edit func(*Options)
	}{
		{"--retention", func(o *Options) { o.Retention = 0 }},
		{"--retention", func(o *Options) { o.Retention = -time.Second }},
		{"--history-retention", func(o *Options) { o.HistoryRetention = 0 }},
		{"--history-retention", func(o *Options) { o.HistoryRetention = -time.Hour }},
		{"--retention-interval", func(o *Options) { o.Interval = 0 }},
		{"--retention-snapshots", func(o *Options) { o.Snapshots = nil }},
		{"--retention-snapshots", func(o *Options) { o.Snapshots = []string{"admission-0", " "} }},
	} {
		o := good
		o.Snapshots = append([]string(nil), good.Snapshots...)
		tc.edit(&o)
		err := o.Validate()
		if err == nil {
			t.Errorf("%+v accepted, want an error naming %s", o, tc.flag)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.flag+" ") && !strings.HasPrefix(err.Error(), tc.flag+":") {
			t.Errorf("%+v: error %q does not name %s", o, err, tc.flag)
		}
	}
}
