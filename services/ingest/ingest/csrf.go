package ingest

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// A browser attaches its client certificate (and, were the console to
// keep one in a cookie, its session) to any request a page of another
// site makes it send. Such a page can send, without asking the server
// first, a POST whose Content-Type is text/plain, a form, or none, and
// JSON in its body: jetqueue would have taken it as the user's. Two
// checks close that, on the HTTP listener only:
//
//   - a write whose request says it comes from another origin
//     (Sec-Fetch-Site cross-site or same-site, or an Origin header whose
//     host is not the request's Host) is refused with 403, by Go's
//     http.CrossOriginProtection. Programs (jqctl, curl, controllers)
//     send neither header and are not affected;
//   - a write with a body must say it is JSON or YAML (writeTypes), which
//     a page can only send after a CORS preflight that jetqueue never
//     grants; anything else is 415 naming the Content-Type header.
//
// The NATS doors build their requests themselves, without a
// Content-Type, and no browser reaches them: they use the routes
// without this guard.

// writeTypes are the media types a write's body may have: what jqctl,
// the console and kubectl send.
var writeTypes = map[string]bool{
	"application/json":                       true,
	"application/yaml":                       true,
	"application/x-yaml":                     true,
	"text/yaml":                              true,
	"application/merge-patch+json":           true,
	"application/strategic-merge-patch+json": true,
	"application/apply-patch+yaml":           true,
}

// guardWrites refuses cross-origin browser writes and writes whose body
// is not JSON or YAML, before authentication.
func (s *Server) guardWrites(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, fail(http.StatusForbidden, "", "Origin",
			"a write from another site's page is refused (Sec-Fetch-Site or Origin names another origin than this server)"))
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := writeContentType(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// writeContentType refuses a write that has a body, or says it has one,
// unless it is JSON or YAML.
func writeContentType(r *http.Request) error {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil // a bodyless action: finish, rebuild, delete
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && writeTypes[strings.ToLower(mt)] {
		return nil
	}
	got := "none"
	if ct != "" {
		got = fmt.Sprintf("%q", ct)
	}
	return fail(http.StatusUnsupportedMediaType, "", "Content-Type",
		"a write's body must be application/json or application/yaml (or a Kubernetes patch type); got "+got)
}
