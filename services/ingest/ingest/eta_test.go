package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jetqueue/jetqueue/libs/api"
	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/counterfactual"
	"github.com/jetqueue/jetqueue/libs/engine"
	"github.com/jetqueue/jetqueue/libs/eta"
	"github.com/jetqueue/jetqueue/libs/history"
)

const etaWorld = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohort: all
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 5}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohort: all
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 3}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: a, namespace: ns}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: b, namespace: ns}
spec: {clusterQueue: cq-b}
`

// etaLog records a random run in process (arrivals of random size,
// priority and annotation, finishes of admitted runs, decisions after
// each), as the services would have written it.
func etaLog(t *testing.T, steps int, seed uint64) []history.Record {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 5))
	objs, err := api.Decode([]byte(etaWorld))
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, o := range objs {
		api.Default(o)
		if err := rec.Apply(o, t0); err != nil {
			t.Fatal(err)
		}
	}
	at := t0
	for i := range steps {
		at = at.Add(time.Duration(1+rng.IntN(300)) * time.Second)
		var admitted []string
		for k, w := range rec.Eng.Workloads() {
			if w.Status == engine.Admitted {
				admitted = append(admitted, k)
			}
		}
		slices.Sort(admitted)
		if rng.IntN(3) > 0 || len(admitted) == 0 {
			ann := ""
			if rng.IntN(2) == 0 {
				ann = fmt.Sprintf(`,"annotations":{%q:"%dm"}`, api.ExpectedRuntimeAnnot, 1+rng.IntN(30))
			}
			doc := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w%d","namespace":"ns"%s},`+
				`"spec":{"queueName":%q,"priority":%d,"podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[`+
				`{"name":"c","resources":{"requests":{"cpu":"%d"}}}]}}}]}}`, i, ann, []string{"a", "b"}[rng.IntN(2)], rng.IntN(3), 1+rng.IntN(3))
			wls, err := api.Decode([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			api.Default(wls[0])
			if err := rec.Submit(wls[0].(*api.Workload), at); err != nil {
				t.Fatal(err)
			}
		} else if err := rec.Finish(admitted[rng.IntN(len(admitted))], at); err != nil {
			t.Fatal(err)
		}
		rec.Settle(at)
	}
	return rec.Log
}

// etaAnswer is GET /v1/eta's answer, each estimate as raw JSON.
type etaAnswer struct {
	Items []struct {
		Namespace, Name string
		ETA             json.RawMessage `json:"eta"`
	} `json:"items"`
	Total int `json:"total"`
	Steps int `json:"steps"`
	AsOf  struct {
		Seq uint64 `json:"seq"`
	} `json:"asOf"`
}

// TestETAStartsFromTheReplica: GET /v1/eta reads each event of the log
// once. Its answers, over the first part of a random log and then over the
// whole, equal the estimates of the log folded from its first event (a
// full replay); a second request at the same sequence reads nothing, nor
// does one once its computation is stale on the clock; the next after
// more events reads only those.
func TestETAStartsFromTheReplica(t *testing.T) {
	f := newFrontDoor(t)
	log := etaLog(t, 120, 11)
	now := log[len(log)-1].Event.Time.Add(time.Minute)
	f.cfg.Now = func() time.Time { return now }
	publish := func(recs []history.Record) {
		t.Helper()
		for _, r := range recs {
			if _, _, err := bus.Publish(t.Context(), f.js, r.Event, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// check compares GET /v1/eta with the estimates of recs folded whole.
	check := func(recs []history.Record) {
		t.Helper()
		st, err := history.Fold(recs, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		want := eta.Estimates(st.Engine, eta.Recorded(recs, time.Time{}), now)
		code, _, body := f.do(t, "GET", "/v1/eta?limit=1000", nil, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/eta: %d %s", code, body)
		}
		var got etaAnswer
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Total != len(want.Estimates) || len(got.Items) != got.Total || got.AsOf.Seq != uint64(len(recs)) {
			t.Fatalf("%d items of %d at seq %d, want %d at seq %d", len(got.Items), got.Total, got.AsOf.Seq, len(want.Estimates), len(recs))
		}
		admittedLater := 0
		for _, it := range got.Items {
			e := want.Estimates[api.NamespacedName(it.Namespace, it.Name)]
			w, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var g bytes.Buffer
			if err := json.Compact(&g, it.ETA); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w, g.Bytes()) {
				t.Fatalf("%s/%s at seq %d: estimate\n%s\nwant (full replay)\n%s", it.Namespace, it.Name, len(recs), g.Bytes(), w)
			}
			if e.At != nil && e.At.After(now) {
				admittedLater++
			}
		}
		if admittedLater < 3 {
			t.Fatalf("only %d of %d estimates wait for finishes: the log is too easy", admittedLater, len(got.Items))
		}
	}
	read := func() uint64 {
		c := f.etaCache()
		if err := c.acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer c.release()
		return c.read
	}

	half := len(log) / 2
	publish(log[:half])
	check(log[:half])
	if n := read(); n != uint64(half) {
		t.Fatalf("the first request read %d events, want the %d of the log", n, half)
	}
	check(log[:half])
	if n := read(); n != uint64(half) {
		t.Fatalf("a second request at the same sequence read %d more events, want none", n-uint64(half))
	}
	// Stale on the clock: computed again, from the replica.
	now = now.Add(etaFresh)
	check(log[:half])
	if n := read(); n != uint64(half) {
		t.Fatalf("a request at the same sequence after %s read %d more events, want none", etaFresh, n-uint64(half))
	}
	publish(log[half:])
	check(log)
	if n := read(); n != uint64(len(log)) {
		t.Fatalf("after %d more events the replica has read %d in all, want %d", len(log)-half, n, len(log))
	}

	// A page costs the simulation up to its last workload: the first
	// page's estimate is the whole simulation's, after fewer finishes;
	// every page at once takes them all.
	now = now.Add(etaFresh)
	folded, err := history.Fold(log, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	whole := eta.Estimates(folded.Engine, eta.Recorded(log, time.Time{}), now)
	for _, c := range []struct {
		limit   int
		shorter bool
	}{{1, true}, {1000, false}} {
		code, _, body := f.do(t, "GET", fmt.Sprintf("/v1/eta?limit=%d", c.limit), nil, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/eta: %d %s", code, body)
		}
		var page etaAnswer
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if c.shorter != (page.Steps < whole.Steps) || page.Steps > whole.Steps || len(page.Items) != min(c.limit, len(whole.Estimates)) {
			t.Fatalf("limit %d: %d items after %d finishes, the whole simulation %d finishes", c.limit, len(page.Items), page.Steps, whole.Steps)
		}
		for _, it := range page.Items {
			w, err := json.Marshal(whole.Estimates[api.NamespacedName(it.Namespace, it.Name)])
			if err != nil {
				t.Fatal(err)
			}
			var g bytes.Buffer
			if err := json.Compact(&g, it.ETA); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w, g.Bytes()) {
				t.Fatalf("limit %d, %s/%s: estimate\n%s\nwant (whole simulation)\n%s", c.limit, it.Namespace, it.Name, g.Bytes(), w)
			}
		}
	}

	// A counterfactual explanation at the log's end starts from the same
	// replica: it reads no event, and its changes are those a search over
	// the log compacted to the live workloads finds.
	st, err := history.Fold(log, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := history.Compact(log, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for k, w := range st.Engine.Workloads() {
		if w.Status == engine.Pending {
			pending = append(pending, k)
		}
	}
	slices.Sort(pending)
	if len(pending) < 2 {
		t.Fatalf("%d pending workloads: the log is too easy", len(pending))
	}
	for _, k := range pending[:2] {
		want, err := counterfactual.Search(history.Builder(live, time.Time{}), k, now)
		if err != nil {
			t.Fatal(err)
		}
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := f.do(t, "GET", "/v1/workloads/"+k+"/explain?counterfactual=true&eta=false", nil, "")
		if code != http.StatusOK {
			t.Fatalf("explain %s: %d %s", k, code, body)
		}
		var got struct {
			Counterfactuals json.RawMessage `json:"counterfactuals"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		var g bytes.Buffer
		if err := json.Compact(&g, got.Counterfactuals); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w, g.Bytes()) || len(want.Changes) == 0 {
			t.Fatalf("%s: counterfactuals\n%s\nwant (compacted log)\n%s", k, g.Bytes(), w)
		}
	}
	if n := read(); n != uint64(len(log)) {
		t.Fatalf("two explanations read %d events more, want none", n-uint64(len(log)))
	}
}
