package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/testenv"
)

// TestEnsureRetriesWhatMaySucceedLater: a declaration that went unanswered,
// lost a creation race or found JetStream still starting is asked again
// until it succeeds; any other error returns at once.
func TestEnsureRetriesWhatMaySucceedLater(t *testing.T) {
	permission := errors.New("permissions violation")
	overlap := &jetstream.APIError{Code: 400, ErrorCode: 10065, Description: "subjects overlap with an existing stream"}
	notLeader := &jetstream.APIError{Code: 500, ErrorCode: 10009, Description: "JetStream cluster can not handle request"}
	for _, tc := range []struct {
		name      string
		errs      []error // what the server answers, in turn, before success
		wantCalls int
		wantErr   error
	}{
		{"answers at once", nil, 1, nil},
		{"request timed out twice", []error{context.DeadlineExceeded, fmt.Errorf("wrapped: %w", nats.ErrTimeout)}, 3, nil},
		{"another process created it first", []error{jetstream.ErrStreamNameAlreadyInUse}, 2, nil},
		{"created under us four times", []error{jetstream.ErrBucketExists, jetstream.ErrBucketExists, jetstream.ErrBucketExists, jetstream.ErrBucketExists}, 5, nil},
		{"subjects overlap while the other creates it", []error{overlap, fmt.Errorf("ensure: %w", overlap)}, 3, nil},
		{"JetStream still starting", []error{nats.ErrNoResponders, jetstream.ErrJetStreamNotEnabled, notLeader}, 4, nil},
		{"refused", []error{permission}, 1, permission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := Ensure(context.Background(), func(context.Context) (int, error) {
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

// TestEnsureStreamConcurrently: services started together on a fresh
// server all declare JQ_EVENTS at once (with different options, as an
// operator's flags may make them) and every one of them gets it.
func TestEnsureStreamConcurrently(t *testing.T) {
	const rounds, services = 15, 6
	ok := 0
	for round := range rounds {
		srv := testenv.NATS(t)
		errs := make(chan error, services)
		for i := range services {
			go func() {
				errs <- ensureFromOwnConnection(srv.ClientURL(), StreamOptions{MaxAge: time.Duration(i%2) * time.Hour})
			}()
		}
		for range services {
			if err := <-errs; err != nil {
				t.Errorf("round %d: %v", round, err)
				continue
			}
			ok++
		}
		srv.Shutdown()
	}
	if ok != rounds*services {
		t.Errorf("%d of %d declarations succeeded", ok, rounds*services)
	}
}

func ensureFromOwnConnection(url string, o StreamOptions) error {
	nc, err := Connect(url, "ensure")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = EnsureStream(ctx, js, o)
	return err
}

// TestEnsureStopsWhenTheCallerGivesUp: a timeout of the caller's own
// context is not retried.
func TestEnsureStopsWhenTheCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := Ensure(ctx, func(context.Context) (int, error) {
		calls++
		cancel()
		return 0, context.DeadlineExceeded
	})
	if err == nil || calls != 1 {
		t.Errorf("err %v after %d calls; want the error after 1", err, calls)
	}
}

// TestEnsureAsksAgainWhenUnanswered: a server that drops its answer to
// one declaration (as nats-server does to some of several racing ones)
// costs that attempt's bound, not the caller's whole patience.
func TestEnsureAsksAgainWhenUnanswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := 0
	start := time.Now()
	v, err := Ensure(ctx, func(actx context.Context) (int, error) {
		calls++
		if calls == 1 {
			<-actx.Done() // no answer
			return 0, actx.Err()
		}
		return 7, nil
	})
	if err != nil || v != 7 || calls != 2 {
		t.Fatalf("got %d, %v after %d calls; want 7 after 2", v, err, calls)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the unanswered attempt held the caller %s", took)
	}
}

// TestReplicasNeverGuesses: while JQ_EVENTS cannot be read, Replicas is
// an error, not 1: every bucket's create-or-update takes its answer as
// the replicas wanted, and 1 brought an R3 bucket down to R1 when a
// service started while a node of the cluster was down. With no stream
// at all it is 1; with the stream, its replicas.
func TestReplicasNeverGuesses(t *testing.T) {
	srv, js := startJS(t)
	if r, err := Replicas(t.Context(), js); err != nil || r != 1 {
		t.Errorf("without JQ_EVENTS: %d, %v; want 1", r, err)
	}
	if _, err := EnsureStream(t.Context(), js, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, err := Replicas(t.Context(), js); err != nil || r != 1 {
		t.Errorf("with an R1 JQ_EVENTS: %d, %v; want 1", r, err)
	}
	srv.ShutdownJetStream()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if r, err := Replicas(ctx, js); err == nil {
		t.Errorf("with JetStream down: %d and no error, want an error", r)
	}
}

func startJS(t *testing.T) (*server.Server, jetstream.JetStream) {
	t.Helper()
	srv := testenv.NATS(t)
	nc, err := Connect(srv.ClientURL(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv, js
}
