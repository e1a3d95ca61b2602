// Package ingest is the front door of jetqueue: the HTTP API of API.md,
// which validates what clients send with libs/api and publishes it to
// JQ_EVENTS, and the host of the projector (package projector) that keeps
// the PostgreSQL read model the queries are answered from, one writer at
// a time under a lease.
//
// Nothing invalid reaches the stream: a request is decoded and validated
// whole before its first event is published. Uniqueness of a workload name
// is enforced by JetStream itself: a submission is published only if the
// workload's subject is empty (or ends in a deletion), so two concurrent
// submissions of one name cannot both succeed.
package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/clock"
	"github.com/jetqueue/jetqueue/libs/metrics"
	"github.com/jetqueue/jetqueue/libs/retention"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/libs/snapshot"
	"github.com/jetqueue/jetqueue/libs/store"
	"github.com/jetqueue/jetqueue/services/ingest/bridge"
	"github.com/jetqueue/jetqueue/services/ingest/projector"
)

// Config is the service's configuration.
type Config struct {
	NATSURL string
	// NATS is who ingest is to NATS.
	NATS        bus.Identity
	DatabaseURL string
	HTTPAddr    string
	MaxBody     int64
	// HTTP bounds the HTTP server's timeouts and header size.
	HTTP HTTPLimits
	// MaxLag is how many events admission may be behind before
	// submissions are refused with 503; 0 disables the check.
	MaxLag uint64
	Stream bus.StreamOptions
	// Retention is the retention role's knobs (package retention); nil
	// means its defaults. Flags always set it, so a zero or negative
	// value given on the command line is refused.
	Retention *retention.Options
	// Submit bounds JQ_SUBMIT; nil means its defaults.
	Submit *SubmitLimits
	// Heavy bounds the heavy reads (heavy.go); nil means its defaults.
	Heavy *HeavyLimits
	// Now is the clock; nil means the wall clock.
	Now func() time.Time
	// Listening, when set, receives the HTTP address once it listens.
	Listening func(addr string)
	// ManualClock makes the service read the shared manual clock and
	// serve POST /v1/debug/clock/advance (dev and test only).
	ManualClock bool
	// KubeBridge runs the Kubernetes bridge (package bridge): labelled
	// batch/v1 Jobs are submitted, started on admission and stopped on
	// eviction. Kube is its client; nil means one built from Kubeconfig
	// (empty: the in-cluster service account).
	KubeBridge bool
	Kubeconfig string
	Kube       kubernetes.Interface
	// Auth says how callers are identified and what they may do (package
	// auth); with no authenticator and no Anonymous, Run refuses to start.
	Auth auth.Options
}

// leaseTTL is how long a silent ingest keeps the roles one instance
// holds at a time: the projector and the Kubernetes bridge.
const leaseTTL = 5 * time.Second

// Server is one ingest instance.
type Server struct {
	cfg    Config
	log    *zap.Logger
	js     jetstream.JetStream
	stream jetstream.Stream
	store  *store.Store
	// progress follows the projection's position by push (NOTIFY from
	// the projector's commits): watches and minSeq reads wait on it
	// instead of polling. Started by Run, or on first use.
	progress     *store.Progress
	progressOnce sync.Once

	mu          sync.Mutex
	lastCreated time.Time
	// watches counts the open watches per caller (under mu).
	watches map[string]int
	gate    lagGate
	clock   *clock.Manual
	rebuild chan chan error
	guard   *Guard
	// heavyState bounds the heavy reads (heavy.go); made on first use,
	// as tests build a Server without Run.
	heavyOnce  sync.Once
	heavyState *heavyState
	// console is the one reader behind every console push stream
	// (consolehub.go).
	console consoleHub
}

// projected is the projection's position, followed by push.
func (s *Server) projected() *store.Progress {
	s.progressOnce.Do(func() {
		if s.progress == nil {
			// A Server built without Run (tests): followed for the
			// process's life.
			s.progress = s.store.Follow(context.Background())
		}
	})
	return s.progress
}

// Run serves until ctx ends.
func Run(ctx context.Context, rt *service.Runtime, cfg Config) error {
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	if cfg.DatabaseURL == "" {
		return service.Permanent(fmt.Errorf("--database-url (or JQ_DATABASE_URL or DATABASE_URL) is required"))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Retention == nil {
		cfg.Retention = &retention.Options{Retention: retention.DefaultRetention, HistoryRetention: retention.DefaultHistoryRetention,
			Interval: retention.DefaultInterval, Snapshots: retention.DefaultSnapshots}
	}
	if err := cfg.Retention.Validate(); err != nil {
		return service.Permanent(err)
	}
	if cfg.Submit == nil {
		cfg.Submit = &DefaultSubmitLimits
	}
	if err := cfg.Submit.Validate(); err != nil {
		return service.Permanent(err)
	}
	// Before anything else: a server that would let anyone in without
	// anyone having chosen so does not start.
	guard, err := NewGuard(ctx, cfg.Auth)
	if err != nil {
		if errors.Is(err, auth.ErrDiscovery) {
			return err // the issuer may be back when the service restarts
		}
		return service.Permanent(err)
	}
	if guard.Policy == nil {
		rt.Log.Warn("no --authorization-policy-file: every identified caller may do everything")
	}
	var kube kubernetes.Interface
	if cfg.KubeBridge {
		if kube = cfg.Kube; kube == nil {
			var err error
			if kube, err = bridge.Client(cfg.Kubeconfig); err != nil {
				return err
			}
		}
	}
	natsOpts, err := cfg.NATS.Options()
	if err != nil {
		return err
	}
	conn, err := bus.Open(ctx, cfg.NATSURL, "ingest", cfg.Stream, natsOpts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	nc, js, stream := conn.NC, conn.JS, conn.Stream
	var manual *clock.Manual
	if cfg.ManualClock {
		if manual, err = clock.NewManual(ctx, js); err != nil {
			return err
		}
		cfg.Now = manual.Now
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	s := &Server{cfg: cfg, log: rt.Log, js: js, stream: stream, store: st, clock: manual, rebuild: make(chan chan error), guard: guard,
		progress: st.Follow(ctx)}

	metrics.RegisterIngest(rt.Registry, s.lags)
	handler := s.routes()
	subs, err := s.serveNATS(nc, handler)
	if err != nil {
		return err
	}
	defer func() {
		for _, sub := range subs {
			_ = sub.Drain()
		}
	}()
	leases, ttl, err := bus.EnsureLeaseBucket(ctx, js, leaseTTL)
	if err != nil {
		return err
	}
	instance := "ingest-" + nuid.Next()
	submissions, err := ensureSubmissions(ctx, js, *cfg.Submit)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	srv := s.httpServer(withConsole(s.guardWrites(s.authenticate(handler))))
	if srv.TLSConfig = guard.Authn.TLSConfig(); srv.TLSConfig != nil {
		lis = tls.NewListener(lis, srv.TLSConfig)
	}
	errc := make(chan error, 4)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	pctx, stopProjector := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := projector.Run(pctx, projector.Config{JS: js, Stream: stream, Store: st, Log: rt.Log, Skip: rt.Skip,
			Leader: bus.NewLeadership(leases, projector.LeaseKey, instance, ttl), Rebuild: s.rebuild, Registerer: rt.Registry})
		if err != nil {
			errc <- err
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.consumeSubmissions(pctx, submissions, nc, handler); err != nil {
			errc <- err
		}
	}()
	ret, err := retention.New(retention.Config{Options: *cfg.Retention, JS: js, Stream: stream, Store: st, Log: rt.Log.Named("retention"),
		Leader: bus.NewLeadership(leases, retention.LeaseKey, instance, ttl), Now: cfg.Now, Registerer: rt.Registry})
	if err != nil {
		stopProjector()
		wg.Wait()
		return service.Permanent(err)
	}
	wg.Go(func() {
		if err := ret.Run(pctx); err != nil {
			errc <- err
		}
	})
	if kube != nil {
		wg.Go(func() {
			err := bridge.RunLeading(pctx, bridge.Config{Kube: kube, API: bridge.Handler(asBridge(handler)), JS: js, Log: rt.Log, Skip: rt.Skip,
				SubmissionID: func(ns, key string) string { return digest("submit-key", ns, key) },
				Snapshot:     snapshot.DefaultPolicy, SnapshotMetrics: snapshot.NewMetrics(rt.Registry, "kube-bridge")},
				bus.NewLeadership(leases, "kube-bridge", instance, ttl))
			if err != nil {
				errc <- err
			}
		})
	}
	if cfg.Listening != nil {
		cfg.Listening(lis.Addr().String())
	}
	rt.SetReady(true)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	stopProjector()
	wg.Wait()
	return err
}

// BridgeUser is who the Kubernetes bridge acts as: Kubernetes' own RBAC
// decided who may create the Jobs it submits, so it may do everything.
var BridgeUser = auth.User{Name: "system:jetqueue:kube-bridge", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}

func asBridge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithUser(r.Context(), BridgeUser)))
	})
}

// createdAt gives each accepted workload its creation time: the clock, but
// at least 1 ms after the previous one, so that queue order is total.
func (s *Server) createdAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.cfg.Now().UTC().Truncate(time.Millisecond)
	if next := s.lastCreated.Add(time.Millisecond); !s.lastCreated.IsZero() && !t.After(s.lastCreated) {
		t = next
	}
	s.lastCreated = t
	return t
}
