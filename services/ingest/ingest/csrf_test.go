package ingest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestCrossSiteWritesAreRefused: on the HTTP listener a write must be
// JSON or YAML (415 naming Content-Type otherwise) and must not come
// from another site's page (403), while a program's request (no Origin,
// no Sec-Fetch-Site) and reads from anywhere go through. Nothing refused
// reaches the stream.
func TestCrossSiteWritesAreRefused(t *testing.T) {
	f := newFrontDoor(t)
	h := f.guardWrites(f.h)
	n := 0
	for _, tc := range []struct {
		name         string
		method, path string
		header       map[string]string
		body         string
		want         int
		field        string
	}{
		{name: "text/plain", header: map[string]string{"Content-Type": "text/plain"}, want: 415, field: "Content-Type"},
		{name: "form", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, want: 415, field: "Content-Type"},
		{name: "multipart", header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, want: 415, field: "Content-Type"},
		{name: "no content type", want: 415, field: "Content-Type"},
		{name: "json with charset", header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, want: 202},
		{name: "yaml", header: map[string]string{"Content-Type": "application/yaml"}, want: 202},
		{name: "x-yaml", header: map[string]string{"Content-Type": "application/x-yaml"}, want: 202},
		{name: "other origin", header: map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, want: 403, field: "Origin"},
		{name: "null origin", header: map[string]string{"Content-Type": "application/json", "Origin": "null"}, want: 403, field: "Origin"},
		{name: "same origin", header: map[string]string{"Content-Type": "application/json", "Origin": "http://example.com"}, want: 202},
		{name: "cross-site", header: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, want: 403, field: "Origin"},
		{name: "same-site", header: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, want: 403, field: "Origin"},
		{name: "same-origin fetch", header: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, want: 202},
		{name: "bodyless action", method: "POST", path: "/v1/workloads/ns/w0/podsready", want: 202},
		{name: "cross-site bodyless action", method: "POST", path: "/v1/workloads/ns/w0/podsready",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403, field: "Origin"},
		{name: "cross-site delete", method: "DELETE", path: "/v1/workloads/ns/w0",
			header: map[string]string{"Origin": "https://evil.example"}, want: 403, field: "Origin"},
		{name: "cross-site read", method: "GET", path: "/v1/workloads",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path, body := tc.method, tc.path, tc.body
			if method == "" {
				method, path, body = "POST", "/v1/workloads", workload("w"+strconv.Itoa(n), "1")
				n++
			}
			if tc.name == "bodyless action" {
				if code, _, b := f.do(t, "POST", "/v1/workloads", map[string]string{"Content-Type": "application/json"}, workload("w0", "1")); code >= 300 && code != 409 {
					t.Fatalf("submit w0: %d %s", code, b)
				}
			}
			before := f.messages(t)
			req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, tc.want)
			}
			if tc.field != "" {
				if got := fieldOf(t, rec.Body.Bytes()); got != tc.field {
					t.Errorf("error names %q, want %q", got, tc.field)
				}
				if after := f.messages(t); after != before {
					t.Errorf("a refused write published %d events", after-before)
				}
			}
		})
	}
}

// TestNATSRequestsAreNotBrowserRequests: a NATS door's request has no
// Content-Type, so the write guard would refuse it (415); the NATS doors
// serve the routes without it, and the same request is accepted there.
func TestNATSRequestsAreNotBrowserRequests(t *testing.T) {
	f := newFrontDoor(t)
	msg := &nats.Msg{Header: nats.Header{}, Data: []byte(workload("w1", "1"))}
	serve := func(h http.Handler) int {
		req, err := newRequest("POST", "/v1/workloads", msg.Data, msg)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(t.Context()))
		return rec.Code
	}
	if code := serve(f.guardWrites(f.h)); code != http.StatusUnsupportedMediaType {
		t.Fatalf("through the guard: %d, want 415 (a NATS request has no Content-Type)", code)
	}
	if code := serve(f.h); code != http.StatusAccepted {
		t.Fatalf("as the NATS doors serve it: %d, want 202", code)
	}
}
