package ingest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetqueue/jetqueue/libs/auth/rbac"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/natsconf"
)

// shippedPolicy is deploy/auth/policy.yaml, the example policy, with
// extra appended, and with each of drop (a document's metadata name)
// left out.
func shippedPolicy(t *testing.T, extra string, drop ...string) *rbac.Policy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "auth", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		dropped := false
		for _, name := range drop {
			dropped = dropped || strings.Contains(doc, "\n  name: "+name+"\n")
		}
		if !dropped {
			kept = append(kept, doc)
		}
	}
	if len(kept) != len(strings.Split(string(data), "\n---\n"))-len(drop) {
		t.Fatalf("policy.yaml lacks one of %v", drop)
	}
	p, err := rbac.Parse([]byte(strings.Join(kept, "\n---\n") + extra))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDurableSubmissionActsAsItsNamespacesSubmitter: a durable
// submission is authorized as system:jetqueue:submit:<namespace>, not as
// a member of system:masters. Under the shipped policy, which binds
// team-a's submitter to jetqueue-submitter in team-a, it is accepted;
// without that binding it is rejected with 403, published on
// jq.rejected.team-a.<ce-id token>, and nothing is submitted.
func TestDurableSubmissionActsAsItsNamespacesSubmitter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   []string
		status int
	}{
		{"shipped policy", nil, http.StatusAccepted},
		{"team-a's submitter not bound", []string{"team-a-submitter"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFrontDoor(t)
			f.guard = &Guard{Policy: shippedPolicy(t, "", tc.drop...)}
			nc := f.js.Conn()
			ctx := t.Context()
			cons, err := ensureSubmissions(ctx, f.js, DefaultSubmitLimits)
			if err != nil {
				t.Fatal(err)
			}
			rejected, err := nc.SubscribeSync(RejectedSubject("team-a", "sub-1"))
			if err != nil {
				t.Fatal(err)
			}
			m := nats.NewMsg(SubmitSubjectOf("team-a", "w"))
			m.Header.Set(events.HeaderID, "sub-1")
			m.Header.Set(events.HeaderType, SubmitType)
			m.Data = []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w","namespace":"team-a"},
 "spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`)
			if _, err := f.js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var answered int
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rw := &statusRecorder{ResponseWriter: w}
				f.h.ServeHTTP(rw, r)
				answered = rw.status
			})
			for msg := range batch.Messages() {
				f.submitDurable(nc, h, msg)
			}
			if answered != tc.status {
				t.Fatalf("the durable submission was answered %d, want %d", answered, tc.status)
			}
			rej, err := rejected.NextMsg(time.Second)
			switch {
			case tc.status == http.StatusForbidden && err != nil:
				t.Errorf("no rejection published: %v", err)
			case tc.status == http.StatusForbidden && (rej.Header.Get("Status") != "403" || !strings.Contains(string(rej.Data), SubmitterName("team-a"))):
				t.Errorf("rejection %s %s, want 403 naming %s", rej.Header.Get("Status"), rej.Data, SubmitterName("team-a"))
			case tc.status != http.StatusForbidden && err == nil:
				t.Errorf("an accepted submission was rejected: %s %s", rej.Header.Get("Status"), rej.Data)
			}
		})
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// TestNATSUserIsNotTheHTTPUserOfItsName: a NATS request from a user named
// alice acts as nats:<account>:alice, not as the HTTP user alice, whom
// the policy makes batch-admin: it is refused, and the refusal names the
// NATS identity. Bound by its NATS name, the same request is allowed.
func TestNATSUserIsNotTheHTTPUserOfItsName(t *testing.T) {
	const aliceAdmin = `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-admin}
subjects: [{kind: User, name: alice}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: batch-admin}
`
	natsAlice := NATSUserName("NS_TEAM_X", "alice")
	for _, tc := range []struct {
		name, extra string
		forbidden   bool
	}{
		{"HTTP alice is admin", aliceAdmin, true},
		{"the NATS user is bound", strings.ReplaceAll(aliceAdmin, "name: alice}", fmt.Sprintf("name: %q}", natsAlice)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFrontDoor(t)
			f.guard = &Guard{Policy: shippedPolicy(t, tc.extra)}
			nc := f.js.Conn()
			subs, err := f.serveNATS(nc, f.h)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, s := range subs {
					_ = s.Unsubscribe()
				}
			})
			// No account boundary on this test server: the header is set
			// here as the NATS server sets it on a request crossing an
			// import from account NS_TEAM_X.
			m := nats.NewMsg(SubjectFinish)
			m.Header.Set(natsconf.RequestInfoHeader, `{"acc":"NS_TEAM_X","user":"alice"}`)
			m.Data = []byte(`{"namespace":"team-a","name":"ghost","succeeded":true}`)
			reply, err := nc.RequestMsg(m, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			status := reply.Header.Get("Status")
			if forbidden := status == "403"; forbidden != tc.forbidden {
				t.Errorf("finish as NATS alice: %s %s, forbidden want %v", status, reply.Data, tc.forbidden)
			}
			if tc.forbidden && !strings.Contains(string(reply.Data), natsAlice) {
				t.Errorf("the refusal %s does not name %s", reply.Data, natsAlice)
			}
		})
	}
}
