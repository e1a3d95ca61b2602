package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/service"
	"github.com/jetqueue/jetqueue/services/admission/admission"
	"github.com/jetqueue/jetqueue/services/ingest/ingest"
)

// tenancy is admission and ingest on the shipped NATS accounts
// (deploy/nats/jetqueue.conf) under the shipped policy
// (deploy/auth/policy.yaml, whose bindings let each namespace's durable
// submitter create workloads there), with JQ_SUBMIT's limits set and
// ingest stoppable, so that a namespace can fill its share while nobody
// drains it.
type tenancy struct {
	*secured
	startIngest func() func()
}

// startTenancy starts it; the durable submitters of unbound lose their
// binding (policy.yaml's subject is renamed to a user nobody is).
func startTenancy(t *testing.T, lim ingest.SubmitLimits, unbound ...string) *tenancy {
	t.Helper()
	s := &tenancy{secured: startShippedNATS(t)}
	ids := s.ids
	policy, err := os.ReadFile("../deploy/auth/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range unbound {
		bound := "name: " + ingest.SubmitterName(ns) + "\n"
		if !strings.Contains(string(policy), bound) {
			t.Fatalf("policy.yaml does not bind %s", ingest.SubmitterName(ns))
		}
		policy = []byte(strings.Replace(string(policy), bound, "name: nobody\n", 1))
	}
	// The test's own HTTP calls are anonymous: make them administrators.
	policy = append(policy, `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: anonymous-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
subjects: [{kind: Group, name: system:unauthenticated}]
`...)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		t.Fatal(err)
	}
	s.run("admission", func(ctx context.Context, rt *service.Runtime) error {
		return admission.Run(ctx, rt, admission.Config{Member: bus.Member{NATSURL: s.url, Identity: ids["admission"],
			Shard: "admission-0", Instance: "a", LeaseTTL: 2 * time.Second}})
	})
	s.startIngest = func() func() {
		addr := make(chan string, 1)
		stop := s.run("ingest", func(ctx context.Context, rt *service.Runtime) error {
			return ingest.Run(ctx, rt, ingest.Config{NATSURL: s.url, NATS: ids["ingest"], DatabaseURL: s.db, HTTPAddr: "127.0.0.1:0",
				Submit: &lim, Auth: auth.Options{Anonymous: true, AuthorizationPolicyFile: policyFile}, Listening: func(a string) { addr <- a }})
		})
		select {
		case a := <-addr:
			s.base = "http://" + a
		case <-time.After(2 * time.Minute):
			t.Fatal("ingest did not start")
		}
		return stop
	}
	stop := s.startIngest()
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(securedWorld))
	stop()
	return s
}

// durable publishes a durable submission of body under id as nc's user.
func durable(ctx context.Context, js jetstream.JetStream, ns, id string, body []byte) error {
	m := nats.NewMsg(ingest.SubmitSubjectOf(ns, id))
	m.Header.Set(events.HeaderSpecVersion, "1.0")
	m.Header.Set(events.HeaderID, id)
	m.Header.Set(events.HeaderType, ingest.SubmitType)
	m.Header.Set(events.HeaderSource, ns)
	m.Data = body
	_, err := js.PublishMsg(ctx, m)
	return err
}

// TestOneNamespaceCannotFillJQSubmit is the flood on the shipped
// accounts: while ingest is down, team-a publishes durable submissions
// until JQ_SUBMIT refuses them. It gets exactly its share, then
// JetStream's retryable refusal (the NATS 503), and a 1 MB body is
// refused at the door; team-b's durable submission is still taken, and
// once ingest is back it is handled, as are team-b's HTTP submission and
// every one of team-a's that was taken — and nothing else.
func TestOneNamespaceCannotFillJQSubmit(t *testing.T) {
	const share = 20
	s := startTenancy(t, ingest.SubmitLimits{MaxMsgs: 10_000, MaxBytes: 64 << 20, MaxMsgsPerNamespace: share})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ncA, _ := s.conn("team-a")
	jsA, _ := jetstream.New(ncA)
	taken, refusedAt := 0, -1
	for i := range 10 * share {
		err := durable(ctx, jsA, "team-a", fmt.Sprintf("flood-%03d", i), teamWorkload("team-a", fmt.Sprintf("flood-%03d", i), "1"))
		if err != nil {
			if !ingest.SubmitRefusedRetryable(err) {
				t.Fatalf("team-a's submission %d: %v, want JetStream's retryable refusal (%d)", i, err, ingest.CodeSubmitFull)
			}
			refusedAt = i
			break
		}
		taken++
	}
	if taken != share || refusedAt != share {
		t.Fatalf("team-a had %d submissions taken, refused at %d; want %d, then a refusal", taken, refusedAt, share)
	}
	huge := teamWorkload("team-a", "huge", "1")
	huge = []byte(strings.Replace(string(huge), `"namespace":"team-a"`, `"namespace":"team-a","annotations":{"pad":"`+strings.Repeat("x", 1_000_000)+`"}`, 1))
	var apiErr *jetstream.APIError
	if err := durable(ctx, jsA, "team-a", "huge", huge); !errors.As(err, &apiErr) || apiErr.ErrorCode != ingest.CodeSubmitTooLarge {
		t.Errorf("a 1 MB submission: %v, want JetStream's refusal %d", err, ingest.CodeSubmitTooLarge)
	}

	ncB, _ := s.conn("team-b")
	jsB, _ := jetstream.New(ncB)
	if err := durable(ctx, jsB, "team-b", "b-durable", teamWorkload("team-b", "b-durable", "1")); err != nil {
		t.Fatalf("team-b's durable submission while team-a is at its limit: %v", err)
	}

	s.startIngest()
	s.must(http.StatusAccepted, "POST", "/v1/workloads", teamWorkload("team-b", "b-http", "1"))
	poll(t, "every taken submission in the log", func() error {
		got := s.eventsPerWorkload(events.WorkloadSubmitted)
		a := 0
		for k, n := range got {
			if strings.HasPrefix(k, "team-a/flood-") {
				a += n
			}
		}
		if a != share || got["team-b/b-durable"] != 1 || got["team-b/b-http"] != 1 {
			return fmt.Errorf("team-a %d of %d, team-b durable %d, http %d", a, share, got["team-b/b-durable"], got["team-b/b-http"])
		}
		return nil
	})
	s.sync()
	got := s.eventsPerWorkload(events.WorkloadSubmitted)
	if n := len(got); n != share+2 {
		t.Errorf("%d workloads submitted, want %d: %v", n, share+2, got)
	}
	if got["team-a/huge"] != 0 || got[fmt.Sprintf("team-a/flood-%03d", share)] != 0 {
		t.Errorf("a refused submission is in the log: %v", got)
	}
	// The refusal was worth retrying: with the stream drained, team-a's
	// refused submission is taken and handled.
	poll(t, "team-a's retry taken", func() error {
		return durable(ctx, jsA, "team-a", fmt.Sprintf("flood-%03d", share), teamWorkload("team-a", fmt.Sprintf("flood-%03d", share), "1"))
	})
	poll(t, "team-a's retry in the log", func() error {
		if n := s.eventsPerWorkload(events.WorkloadSubmitted)[fmt.Sprintf("team-a/flood-%03d", share)]; n != 1 {
			return fmt.Errorf("submitted %d times", n)
		}
		return nil
	})
}

// TestDurableSubmitterNeedsItsBinding: on the shipped accounts, under the
// shipped policy with team-b's submitter unbound, team-b's durable
// submission is rejected with 403 naming its submitter, on
// jq.rejected.team-b.…, and not submitted; team-a's, bound, is accepted.
func TestDurableSubmitterNeedsItsBinding(t *testing.T) {
	s := startTenancy(t, ingest.DefaultSubmitLimits, "team-b")
	s.startIngest()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subscribe := func(ns string) (jetstream.JetStream, *nats.Subscription) {
		nc, _ := s.conn(ns)
		js, _ := jetstream.New(nc)
		rejected, err := nc.SubscribeSync(ingest.RejectedSubject(ns, "sub-1"))
		if err != nil {
			t.Fatal(err)
		}
		return js, rejected
	}
	jsA, rejA := subscribe("team-a")
	jsB, rejB := subscribe("team-b")
	if err := durable(ctx, jsB, "team-b", "sub-1", teamWorkload("team-b", "unbound", "1")); err != nil {
		t.Fatal(err)
	}
	if err := durable(ctx, jsA, "team-a", "sub-1", teamWorkload("team-a", "bound", "1")); err != nil {
		t.Fatal(err)
	}
	m, err := rejB.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("team-b's unbound submission: no rejection: %v", err)
	}
	if m.Header.Get("Status") != "403" || !strings.Contains(string(m.Data), ingest.SubmitterName("team-b")) {
		t.Errorf("rejection %s %s, want 403 naming %s", m.Header.Get("Status"), m.Data, ingest.SubmitterName("team-b"))
	}
	poll(t, "team-a's submission in the log", func() error {
		if s.eventsPerWorkload(events.WorkloadSubmitted)["team-a/bound"] != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	s.sync()
	if got := s.eventsPerWorkload(events.WorkloadSubmitted); got["team-b/unbound"] != 0 || len(got) != 1 {
		t.Errorf("submitted %v, want team-a/bound only", got)
	}
	if m, err := rejA.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("team-a's accepted submission was also rejected: %s", m.Data)
	}
}
