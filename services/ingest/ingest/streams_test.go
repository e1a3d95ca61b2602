package ingest

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestNoCallerTakesEveryStream: with a share of 2 per caller and 3 on
// the server, alice's third console stream is 429 on "stream" with
// Retry-After while bob still opens his; once the server holds 3, vera
// gets 503 (the server is full, not her share); a stream alice closes
// is hers to open again. Watches (?watch=true) are counted apart.
func TestNoCallerTakesEveryStream(t *testing.T) {
	g := newGuarded(t, false, true)
	g.cfg.HTTP.MaxWatchesPerCaller = 2
	old := maxWatchers
	maxWatchers = 3
	t.Cleanup(func() { maxWatchers = old })
	open := func(token, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	const alices, bobs = "/v1/watch/workloads?namespace=team-a", "/v1/watch/workloads?namespace=team-b"
	first := open("alice-token", alices)
	if second := open("alice-token", alices); first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("alice's two streams: %d %d", first.StatusCode, second.StatusCode)
	}
	// Refusals are read with open too: a stream let through by mistake
	// fails the test instead of holding it.
	if resp := open("alice-token", alices); resp.StatusCode != http.StatusTooManyRequests || fieldOf(t, readAll(t, resp)) != "stream" ||
		resp.Header.Get("Retry-After") == "" {
		t.Errorf("alice's third stream: %d %v, want 429 on stream with Retry-After", resp.StatusCode, resp.Header)
	}
	// alice's share is full, not the server: bob gets his.
	if resp := open("bob-token", bobs); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's stream while alice's share is full: %d", resp.StatusCode)
	}
	if resp := open("vera-token", "/v1/watch/workloads"); resp.StatusCode != http.StatusServiceUnavailable || fieldOf(t, readAll(t, resp)) != "stream" {
		t.Errorf("a fourth stream on a server that holds three: %d, want 503 on stream", resp.StatusCode)
	}
	// Watches have places of their own.
	if code, _, body := g.call(t, "alice-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true&timeoutSeconds=1", ""); code != http.StatusOK {
		t.Errorf("alice's watch while her streams are full: %d %s", code, body)
	}
	first.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := open("alice-token", alices)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAll reads a refusal's body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	if resp.StatusCode == http.StatusOK {
		return nil // a stream: never ends
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatchesFillTheServerWith503: a server that follows its most
// watches answers 503 to a caller whose own share is not full.
func TestWatchesFillTheServerWith503(t *testing.T) {
	g := newGuarded(t, false, true)
	old := maxWatches
	maxWatches = 1
	t.Cleanup(func() { maxWatches = old })
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads?watch=true&timeoutSeconds=5", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's watch: %v %v", err, resp)
	}
	defer resp.Body.Close()
	if code, _, body := g.call(t, "bob-token", "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/workloads?watch=true&timeoutSeconds=1", ""); code != http.StatusServiceUnavailable {
		t.Errorf("bob's watch on a full server: %d %s, want 503", code, body)
	}
}
