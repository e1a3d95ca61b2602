package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureRetriesWhatMaySucceedLater: a declaration that went unanswered
// or lost a creation race is asked again; any other error returns at once.
func TestEnsureRetriesWhatMaySucceedLater(t *testing.T) {
	permission := errors.New("permissions violation")
	for _, tc := range []struct {
		name      string
		errs      []error // what the server answers, in turn, before success
		wantCalls int
		wantErr   error
	}{
		{"answers at once", nil, 1, nil},
		{"request timed out twice", []error{context.DeadlineExceeded, fmt.Errorf("wrapped: %w", nats.ErrTimeout)}, 3, nil},
		{"another process created it first", []error{jetstream.ErrStreamNameAlreadyInUse}, 2, nil},
		{"created under us three times", []error{jetstream.ErrBucketExists, jetstream.ErrBucketExists, jetstream.ErrBucketExists}, 3, jetstream.ErrBucketExists},
		{"refused", []error{permission}, 1, permission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := Ensure(context.Background(), func() (int, error) {
				calls++
				if calls <= len(tc.errs) {
					return 0, tc.errs[calls-1]
				}
				return 1, nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}

// TestEnsureStopsWhenTheCallerGivesUp: a timeout of the caller's own
// context is not retried.
func TestEnsureStopsWhenTheCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := Ensure(ctx, func() (int, error) {
		calls++
		cancel()
		return 0, context.DeadlineExceeded
	})
	if err == nil || calls != 1 {
		t.Errorf("err %v after %d calls; want the error after 1", err, calls)
	}
}
