package ingest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/auth"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/events"
	"github.com/jetqueue/jetqueue/libs/store"
)

// priorityClasses are the classes of the priority tests: low and high as
// in the reproductions, and a PriorityClass for the pod-class path.
const priorityClasses = `{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"WorkloadPriorityClass","metadata":{"name":"low"},"value":10},
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"WorkloadPriorityClass","metadata":{"name":"high"},"value":1000},
 {"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"pod-high"},"value":2000}]}`

// classJob is a Job in namespace ns whose priority comes from the
// WorkloadPriorityClass label (class non-empty) or from the globalDefault
// PriorityClass (class empty).
func classJob(ns, name, class string) string {
	j := nsJob(ns, name)
	if class != "" {
		j = strings.Replace(j, `"labels":{`, `"labels":{"kueue.x-k8s.io/priority-class":"`+class+`",`, 1)
	}
	return j
}

// prioWorkload is a Workload in namespace ns with spec fields extra
// (JSON members, "" for none); apiVersion is v1beta1 or v1beta2.
func prioWorkload(version, ns, name, extra string) string {
	if extra != "" {
		extra += ","
	}
	return `{"apiVersion":"kueue.x-k8s.io/` + version + `","kind":"Workload","metadata":{"name":"` + name + `","namespace":"` + ns + `"},` +
		`"spec":{"queueName":"lq",` + extra + `"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}}]}}`
}

// storedSpec reads the Workload a submission stored from the log itself,
// not from the code under test.
func storedSpec(t *testing.T, f *frontDoor, ns, name string) api.WorkloadSpec {
	t.Helper()
	m, err := f.stream.GetLastMsgForSubject(t.Context(), events.WorkloadSubject(ns, name))
	if err != nil {
		t.Fatalf("%s/%s is not in the log: %v", ns, name, err)
	}
	ev, err := events.Parse(m.Header.Get, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ev.Data.(*events.WorkloadSubmittedData)
	if !ok {
		t.Fatalf("%s/%s: last event %s", ns, name, ev.Type)
	}
	var wl api.Workload
	if err := json.Unmarshal(d.Workload, &wl); err != nil {
		t.Fatal(err)
	}
	return wl.Spec
}

// brokenDoor is a front door like f (same stream, same database) whose
// own NATS connection and PostgreSQL pool are closed: every read it makes
// fails as a read fails while NATS or PostgreSQL is unreachable.
func brokenDoor(t *testing.T, f *frontDoor, nats, pg bool) (http.Handler, *observer.ObservedLogs) {
	t.Helper()
	conn, err := bus.Open(t.Context(), f.js.Conn().ConnectedUrl(), t.Name()+"-broken", bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), f.db)
	if err != nil {
		t.Fatal(err)
	}
	if nats {
		conn.NC.Close()
	} else {
		t.Cleanup(conn.Close)
	}
	if pg {
		st.Close()
	} else {
		t.Cleanup(st.Close)
	}
	core, logs := observer.New(zap.InfoLevel)
	s := &Server{cfg: Config{Now: time.Now, MaxBody: 1 << 20}, log: zap.New(core), js: conn.JS, stream: conn.Stream,
		store: st, rebuild: make(chan chan error), guard: &Guard{Anonymous: true}}
	return s.routes(), logs
}

func serveOn(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "POST", "/v1/workloads", strings.NewReader(body)))
	return rec
}

// TestClassLookupFailureIsUnavailable: a submission whose priority class
// cannot be read (NATS unreachable, PostgreSQL unreachable for the
// globalDefault PriorityClass) is 503 with Retry-After, naming what could
// not be read, never the 400 "not found" a client would not retry; the
// cause is logged, not shown. A class that really does not exist is still
// the 400 naming the field.
func TestClassLookupFailureIsUnavailable(t *testing.T) {
	f := newFrontDoor(t)
	if code, _, out := f.do(t, "POST", "/v1/apply", nil, priorityClasses); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, out)
	}
	noNATS, natsLogs := brokenDoor(t, f, true, false)
	noPG, pgLogs := brokenDoor(t, f, false, true)
	for _, tc := range []struct {
		name  string
		door  http.Handler
		logs  *observer.ObservedLogs
		body  string
		what  string
		cause string
	}{
		{"Job's WorkloadPriorityClass, NATS down", noNATS, natsLogs, classJob("ns", "j1", "low"), "WorkloadPriorityClass low", "connection closed"},
		{"Workload's WorkloadPriorityClass, NATS down", noNATS, natsLogs, prioWorkload("v1beta1", "ns", "w1", `"priorityClassName":"low","priority":10`), "WorkloadPriorityClass low", "connection closed"},
		{"Job's globalDefault PriorityClass, PostgreSQL down", noPG, pgLogs, classJob("ns", "j2", ""), "the globalDefault PriorityClass", "closed pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serveOn(t, tc.door, tc.body)
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("got %d (Retry-After %q) %s, want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
			var out errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Errors) != 1 || out.RequestID == "" {
				t.Fatalf("body %s", rec.Body)
			}
			if msg := out.Errors[0].Message; !strings.Contains(msg, tc.what) || strings.Contains(msg, tc.cause) {
				t.Errorf("message %q: want it to name %q and not the cause %q", msg, tc.what, tc.cause)
			}
			if n := tc.logs.FilterField(zap.String("request_id", out.RequestID)).FilterMessage("request failed").Len(); n != 1 {
				t.Errorf("%d log entries under request %s, want 1", n, out.RequestID)
			} else if e := tc.logs.FilterField(zap.String("request_id", out.RequestID)).All()[0]; !strings.Contains(e.ContextMap()["error"].(string), tc.cause) {
				t.Errorf("the log does not keep the cause %q: %v", tc.cause, e.ContextMap())
			}
		})
	}
	// The working door still refuses a Job whose class does not exist, on
	// the field that names it. A Workload naming one is taken with the
	// spec.priority it was sent, as Kueue takes it, from a caller who may
	// set priorities (here, without a policy, everyone).
	code, _, out := f.do(t, "POST", "/v1/workloads", nil, classJob("ns", "j3", "missing"))
	if field := "metadata.labels[kueue.x-k8s.io/priority-class]"; code != http.StatusBadRequest || fieldOf(t, out) != field || !strings.Contains(string(out), "not found") {
		t.Errorf("a Job naming a missing class: %d %s, want 400 on %s", code, out, field)
	}
	if code, _, out := f.do(t, "POST", "/v1/workloads", nil, prioWorkload("v1beta1", "ns", "w3", `"priorityClassName":"missing","priority":10`)); code != http.StatusAccepted {
		t.Errorf("a Workload naming a missing class: %d %s, want 202 as Kueue takes it", code, out)
	}
	if got := storedSpec(t, f, "ns", "w3").Priority; got == nil || *got != 10 {
		t.Errorf("stored priority %v, want the 10 sent", got)
	}
	if n := f.messages(t); n != 4 {
		t.Errorf("stream holds %d events, want the 3 classes and w3", n)
	}
}

// TestPriorityComesFromTheClass: behind the shipped policy, a batch-user
// may not set a Workload's spec.priority to anything but what its class
// gives (0 without one): each reproduction is 403 on spec.priority and
// stores nothing. A Workload carrying its class's value is stored with
// that value and the class's source; a batch-admin, and system:masters,
// may set an explicit priority and keep it. Values are read from the log.
func TestPriorityComesFromTheClass(t *testing.T) {
	g := newGuarded(t, false, true)
	if code, _, body := g.call(t, "olga-token", "POST", "/v1/apply", priorityClasses); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, body, message string
	}{
		{"no class, priority 2000000000", prioWorkload("v1beta1", "team-a", "r1", `"priority":2000000000`),
			"spec.priority 2000000000 is not 0, the priority of a Workload without a priority class"},
		{"priorityClassName low, priority 1999999999", prioWorkload("v1beta1", "team-a", "r2", `"priorityClassName":"low","priority":1999999999`),
			"spec.priority 1999999999 is not 10, the value of WorkloadPriorityClass low"},
		{"v1beta2 priorityClassRef high, priority 5", prioWorkload("v1beta2", "team-a", "r3",
			`"priorityClassRef":{"group":"kueue.x-k8s.io","kind":"WorkloadPriorityClass","name":"high"},"priority":5`),
			"spec.priority 5 is not 1000, the value of WorkloadPriorityClass high"},
		{"one of two documents", list(nsWorkload("team-a", "r4"), prioWorkload("v1beta1", "team-a", "r5", `"priority":7`)),
			"spec.priority 7 is not 0, the priority of a Workload without a priority class"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.messages(t)
			code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads", tc.body)
			if code != http.StatusForbidden {
				t.Fatalf("got %d %s, want 403", code, body)
			}
			var out errorBody
			if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Errors) != 1 || out.Errors[0].Field != "spec.priority" {
				t.Fatalf("want one error on spec.priority, got %s", body)
			}
			want := `user "alice" cannot create resource "workloads/priority" in API group "kueue.x-k8s.io" in the namespace "team-a": ` + tc.message
			if got := out.Errors[0].Message; got != want {
				t.Errorf("message\n got %s\nwant %s", got, want)
			}
			if after := g.messages(t); after != before {
				t.Errorf("a refused submission published %d events", after-before)
			}
		})
	}
	masters := func(body string) *httptest.ResponseRecorder {
		// The NATS front doors put the user on the context themselves.
		req := httptest.NewRequestWithContext(auth.WithUser(t.Context(), auth.User{Name: "root", Groups: []string{auth.GroupMasters}}),
			"POST", "/v1/workloads", strings.NewReader(body))
		rec := httptest.NewRecorder()
		g.routes().ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		name, token, body, wlName string
		want                      api.WorkloadSpec
	}{
		{"batch-user, the class's value", "alice-token", prioWorkload("v1beta1", "team-a", "a1", `"priorityClassName":"low","priority":10`), "a1",
			api.WorkloadSpec{PriorityClassName: "low", PriorityClassSource: api.WorkloadPriorityClassSrc, Priority: ptrTo[int32](10)}},
		{"batch-user, v1beta2 ref with the class's value", "alice-token", prioWorkload("v1beta2", "team-a", "a2",
			`"priorityClassRef":{"group":"scheduling.k8s.io","kind":"PriorityClass","name":"pod-high"},"priority":2000`), "a2",
			api.WorkloadSpec{PriorityClassName: "pod-high", PriorityClassSource: api.PodPriorityClassSrc, Priority: ptrTo[int32](2000)}},
		{"batch-user, no class, explicit 0", "alice-token", prioWorkload("v1beta1", "team-a", "a3", `"priority":0`), "a3",
			api.WorkloadSpec{Priority: ptrTo[int32](0)}},
		{"batch-admin, explicit priority", "olga-token", prioWorkload("v1beta1", "team-b", "o1", `"priorityClassName":"low","priority":1999999999`), "o1",
			api.WorkloadSpec{PriorityClassName: "low", PriorityClassSource: api.WorkloadPriorityClassSrc, Priority: ptrTo[int32](1999999999)}},
		{"system:masters, explicit priority", "", prioWorkload("v1beta1", "team-b", "m1", `"priority":2000000000`), "m1",
			api.WorkloadSpec{Priority: ptrTo[int32](2000000000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var body string
			if tc.token == "" {
				rec := masters(tc.body)
				code, body = rec.Code, rec.Body.String()
			} else {
				code, _, body = g.call(t, tc.token, "POST", "/v1/workloads", tc.body)
			}
			if code != http.StatusAccepted {
				t.Fatalf("got %d %s, want 202", code, body)
			}
			ns, _, _ := strings.Cut(strings.SplitN(tc.body, `"namespace":"`, 2)[1], `"`)
			got := storedSpec(t, g.frontDoor, ns, tc.wlName)
			got = api.WorkloadSpec{PriorityClassName: got.PriorityClassName, PriorityClassSource: got.PriorityClassSource, Priority: got.Priority}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stored priority (-want +got):\n%s", diff)
			}
		})
	}
	// A class that does not exist: a batch-user is refused on the field
	// naming it; a batch-admin's Workload is taken as sent, as Kueue
	// takes it.
	missing := `"priorityClassName":"missing","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","priority":10`
	if code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads", prioWorkload("v1beta1", "team-a", "x1", missing)); code != http.StatusBadRequest ||
		fieldOf(t, []byte(body)) != "spec.priorityClassName" {
		t.Errorf("batch-user naming a missing class: %d %s, want 400 on spec.priorityClassName", code, body)
	}
	if code, _, body := g.call(t, "olga-token", "POST", "/v1/workloads", prioWorkload("v1beta1", "team-b", "x2", missing)); code != http.StatusAccepted {
		t.Errorf("batch-admin naming a missing class: %d %s, want 202", code, body)
	} else if got := storedSpec(t, g.frontDoor, "team-b", "x2").Priority; got == nil || *got != 10 {
		t.Errorf("batch-admin's stored priority %v, want the 10 sent", got)
	}
	// Kueue refuses a Workload naming a class without a priority (its
	// webhook resolves no class for a bare Workload; conformance
	// jetqueue/190): so does ingest, in either version.
	for _, v := range []string{"v1beta1", "v1beta2"} {
		extra := `"priorityClassName":"low"`
		if v == "v1beta2" {
			extra = `"priorityClassRef":{"group":"kueue.x-k8s.io","kind":"WorkloadPriorityClass","name":"low"}`
		}
		code, _, body := g.call(t, "alice-token", "POST", "/v1/workloads", prioWorkload(v, "team-a", "n-"+v, extra))
		if code != http.StatusBadRequest || fieldOf(t, []byte(body)) != "spec.priority" {
			t.Errorf("%s class without priority: %d %s, want 400 on spec.priority", v, code, body)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
