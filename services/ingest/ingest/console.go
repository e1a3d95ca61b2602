package ingest

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The web console (/ui) is static: plain ES modules, embedded, with no
// data in them. Every piece of data it shows comes from the API, through
// the same authentication and authorization as any client's call (the
// console sends the bearer token the user gives it, or none; a client
// certificate is the browser's). Its pages are served to anyone, as a
// login page is.

//go:embed console
var consoleFiles embed.FS

// consolePolicy keeps the console to its own files: no inline script or
// style, nothing from elsewhere, no framing.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// withConsole serves the console's files (GET /ui and below) before
// authentication, which every other path goes through: they hold no
// data, and a browser cannot send a bearer token with a page load.
func withConsole(next http.Handler) http.Handler {
	files := consoleHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ui" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		case strings.HasPrefix(r.URL.Path, "/ui/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			files.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func consoleHandler() http.Handler {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consolePolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
