package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// TestQueriesExplainAndPositions: explain names the blocking cell and the
// workloads ahead; Kueue's visibility endpoints give queue positions; the
// ClusterQueue summary counts and sums usage.
func TestQueriesExplainAndPositions(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(oneQueue("2")))
	for i := range 4 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.sync()
	var ex struct {
		Status string `json:"status"`
		Detail struct {
			Reason    string `json:"reason"`
			Flavor    string `json:"flavor"`
			Resource  string `json:"resource"`
			Shortfall int64  `json:"shortfall"`
		} `json:"detail"`
		Ahead      []string `json:"ahead"`
		AheadCount int      `json:"aheadCount"`
	}
	if code := s.call("GET", "/v1/workloads/ns/w3/explain", nil, &ex); code != http.StatusOK {
		t.Fatalf("explain: %d", code)
	}
	if ex.Status != "pending" || ex.Detail.Reason != "WaitingForQuota" || ex.Detail.Flavor != "rf" || ex.Detail.Resource != "cpu" ||
		ex.Detail.Shortfall != 1000 || ex.AheadCount != 1 || !cmp.Equal(ex.Ahead, []string{"ns/w2"}) {
		t.Errorf("explain w3: %+v", ex)
	}
	var summary struct {
		Items []struct {
			Metadata               struct{ Name string } `json:"metadata"`
			PositionInClusterQueue int                   `json:"positionInClusterQueue"`
			PositionInLocalQueue   int                   `json:"positionInLocalQueue"`
		} `json:"items"`
	}
	for _, path := range []string{"/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads",
		"/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/lq/pendingworkloads"} {
		if code := s.call("GET", path, nil, &summary); code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		if len(summary.Items) != 2 || summary.Items[0].Metadata.Name != "w2" || summary.Items[1].PositionInClusterQueue != 1 ||
			summary.Items[1].PositionInLocalQueue != 1 {
			t.Errorf("%s: %+v", path, summary.Items)
		}
	}
	var cq struct {
		Pending, Admitted int
		Usage             []struct{ Used, Nominal, Borrowed int64 }
	}
	if code := s.call("GET", "/v1/clusterqueues/cq", nil, &cq); code != http.StatusOK || cq.Pending != 2 || cq.Admitted != 2 ||
		cq.Usage[0].Used != 2000 || cq.Usage[0].Nominal != 2000 || cq.Usage[0].Borrowed != 0 {
		t.Errorf("clusterqueue: %d %+v", code, cq)
	}
	if code := s.call("GET", "/v1/clusterqueues/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown clusterqueue: %d", code)
	}
}

// TestProjectionRebuildRestoresTheSameState drops the projection and
// replays the stream: the query API answers as before.
func TestProjectionRebuildRestoresTheSameState(t *testing.T) {
	s := start(t)
	s.must(http.StatusOK, "POST", "/v1/apply", []byte(restartWorld))
	for i := range 60 {
		s.must(http.StatusAccepted, "POST", "/v1/workloads", cpuWorkload(fmt.Sprint("w", i)))
	}
	s.must(http.StatusAccepted, "POST", "/v1/workloads/ns/w0/finish", nil)
	s.sync()
	before := s.workloads()
	// Damage the read model behind the service's back: only a replay of
	// the stream can bring the rows back.
	db, err := pgx.Connect(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `DELETE FROM workloads WHERE name LIKE 'w1%'`); err != nil {
		t.Fatal(err)
	}
	db.Close(context.Background())
	if len(s.workloads()) == len(before) {
		t.Fatal("damage did not take")
	}
	s.must(http.StatusAccepted, "POST", "/v1/projection/rebuild", nil)
	s.sync()
	if d := cmp.Diff(before, s.workloads()); d != "" {
		t.Errorf("rebuilt projection differs (-before +after):\n%s", d)
	}
}
